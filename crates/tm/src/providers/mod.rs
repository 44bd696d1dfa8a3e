//! The three hint providers: device manager, static CPU manager, static memory manager.

pub mod cpu;
pub mod devices;
pub mod memory;
