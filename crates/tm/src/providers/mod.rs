//! The three hint providers: device manager, static CPU manager, static memory manager.

pub(crate) mod cpu;
pub(crate) mod devices;
pub(crate) mod memory;
