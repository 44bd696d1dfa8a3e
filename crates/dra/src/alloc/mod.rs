//! The one model of the stock DRA allocator (`kube-scheduler`'s structured allocator): what
//! it picks for a claim on one node ([`first_fit`]), the same search prepared once and
//! asked many times ([`ClaimSearch`]), the CEL subset device selectors use ([`Selector`]),
//! shared capacities, what an allocation hands out ([`AllocatedDevice`]), and the one
//! default search budget ([`DEFAULT_BUDGET`]).
//!
//! [`first_fit`]: crate::alloc::first_fit
//! [`ClaimSearch`]: crate::alloc::ClaimSearch
//! [`Selector`]: crate::alloc::Selector
//! [`AllocatedDevice`]: crate::alloc::AllocatedDevice
//! [`DEFAULT_BUDGET`]: crate::alloc::DEFAULT_BUDGET

mod allocated;
mod allocator;
mod capacity;
pub(crate) mod cel;

pub use allocated::AllocatedDevice;
pub use allocator::{
    ClaimSearch, DEFAULT_BUDGET, DeviceId, Found, NodeDevices, Outcome, Share, SharedHeld,
    first_fit,
};
pub use capacity::milli_text;
pub use cel::Selector;
