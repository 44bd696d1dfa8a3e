//! The joint GPU+NIC+CPU allocator: exact, explained, fast.
