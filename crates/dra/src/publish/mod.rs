//! What the node publishes: its [`Inventory`] (plain GPUs, plain NICs, GPU+NIC pairs, MIG
//! instances and MIG×NIC pairs, named stably from PCI addresses), the ResourceSlices that
//! carry it with their shared counters ([`resource_slices`]), the DeviceClasses that select
//! it ([`device_classes`], [`mig_device_classes`]), static, dynamic and written-down MIG
//! ([`NodeMig`]), and rail pinning of claims ([`pin_rails`]).
//!
//! [`Inventory`]: crate::publish::Inventory
//! [`resource_slices`]: crate::publish::resource_slices
//! [`device_classes`]: crate::publish::device_classes
//! [`mig_device_classes`]: crate::publish::mig_device_classes
//! [`NodeMig`]: crate::publish::NodeMig
//! [`pin_rails`]: crate::publish::pin_rails

mod classes;
mod entries;
mod inventory;
pub(crate) mod mig;
pub(crate) mod names;
mod rails;
mod slices;

pub(crate) use classes::driver_class;
pub use classes::{
    CLASS_GPU, CLASS_MIG, CLASS_MIG_PAIR, CLASS_NIC, CLASS_PAIR, ExtendedResources,
    class_for_resource, device_classes, device_classes_with, mig_device_classes,
    mig_device_classes_with, mig_profile_class, mig_profile_class_name,
};
pub use entries::{GpuEntry, NicFunction, PairEntry, PhysicalNic};
pub use inventory::{CounterUse, DeviceKind, DeviceRef, Inventory, PairsPerGpu, PublishOptions};
pub use mig::{
    MigEntry, MigGeometryError, MigGpuLayout, MigInstance, MigJoinError, MigPairEntry, NodeMig,
};
pub use names::{dns_label_problem, pair_device};
pub use rails::{pin_rails, pin_rails_per_rail};
pub use slices::{counter_sets, resource_slices, slices_for};
