//! The `resource.k8s.io/v1` validation limits the API server enforces (1.37), and the
//! allocator's own (see REFERENCE §6 and the measurements).

/// Devices per ResourceSlice.
pub const MAX_DEVICES_PER_SLICE: usize = 128;
/// Devices per ResourceSlice when any device consumes counters (or has taints).
pub const MAX_DEVICES_PER_SLICE_WITH_COUNTERS: usize = 64;
/// Counter sets per ResourceSlice.
pub const MAX_COUNTER_SETS_PER_SLICE: usize = 8;
/// Counters per counter set.
pub const MAX_COUNTERS_PER_SET: usize = 32;
/// `consumesCounters` entries per device.
pub const MAX_CONSUMES_COUNTERS_PER_DEVICE: usize = 2;
/// Attributes plus capacities per device.
pub const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
/// Length of a string attribute value.
pub const MAX_STRING_ATTRIBUTE: usize = 64;
/// Requests per claim.
pub(crate) const MAX_REQUESTS_PER_CLAIM: usize = 32;
/// Constraints per claim.
pub(crate) const MAX_CONSTRAINTS_PER_CLAIM: usize = 32;
/// Devices the allocator hands to one claim (the API accepts `count: 33`, the
/// allocator refuses it).
pub const MAX_DEVICES_PER_CLAIM: usize = 32;
