//! Typed errors: each names the element (an XPath-like location) and what libvirt or QEMU
//! expects there, so a refused domain is fixable from the message alone.

use thiserror::Error;

/// Everything that stops a rewrite.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum VmError {
    /// The input is not well-formed XML.
    #[error("{what} is not well-formed XML: {detail}")]
    Xml {
        /// Which document ("the domain XML", "the capabilities XML").
        what: &'static str,
        /// The parser's message, with its line and column.
        detail: String,
    },
    /// The document's root element is not the expected one.
    #[error("{what}: the root element is <{found}>, expected <{expected}>")]
    WrongRoot {
        /// Which document.
        what: &'static str,
        /// The root element found.
        found: String,
        /// The root element expected.
        expected: &'static str,
    },
    /// An attribute or element has a value libvirt would not parse.
    #[error("{element}: {attribute}=`{value}` is invalid: expected {expected}")]
    BadValue {
        /// Location of the element, e.g. `/domain/cputune/vcpupin[2]`.
        element: String,
        /// The attribute (or `text` for element content).
        attribute: &'static str,
        /// The value found.
        value: String,
        /// What would have been accepted.
        expected: String,
    },
    /// A required attribute or child element is missing.
    #[error("{element}: missing {missing}")]
    Missing {
        /// Location of the element.
        element: String,
        /// The attribute or child that is missing.
        missing: &'static str,
    },
    /// Devices need guest NUMA cells but the domain has none.
    #[error(
        "/domain/cpu/numa is missing: {devices} passed-through device(s) need a guest NUMA cell for their pcie-expander-bus <node>, and libvirt refuses a <node> with no <cpu><numa><cell>"
    )]
    NumaMissing {
        /// How many devices needed a cell.
        devices: usize,
    },
    /// A guest cell is declared twice or a vCPU sits in two cells.
    #[error("/domain/cpu/numa/cell[@id='{cell}']: {detail}")]
    BadCell {
        /// The cell id.
        cell: u32,
        /// What is wrong.
        detail: String,
    },
    /// An expander's bus number range is outside 1–254 or overlaps another bus range.
    #[error("{element}: busNr {bus_nr} (buses {bus_nr}–{last}) {detail}")]
    BusRange {
        /// Location of the controller.
        element: String,
        /// Its busNr.
        bus_nr: u32,
        /// The last bus number of its range.
        last: u32,
        /// What it collides with or which limit it breaks.
        detail: String,
    },
    /// Not enough bus numbers for the expanders the devices need.
    #[error(
        "not enough PCI bus numbers: the expanders need {needed} buses below 255 but pcie.0's hierarchy may use buses up to {floor} ({detail})"
    )]
    OutOfBuses {
        /// Bus numbers the new expanders need in all.
        needed: u32,
        /// The highest bus pcie.0's own hierarchy may use.
        floor: u32,
        /// How the floor was estimated.
        detail: String,
    },
    /// More ports than a bus has slots.
    #[error("{element}: {count} {what} do not fit; a PCIe bus has {limit} slots")]
    TooManyDevices {
        /// The controller that ran out of slots.
        element: String,
        /// What was being placed.
        what: &'static str,
        /// How many.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// chassis, port or index outside what libvirt accepts, or duplicated.
    #[error("{element}: {attribute}={value} {detail}")]
    PortNumber {
        /// Location of the controller.
        element: String,
        /// `chassis`, `port` or `index`.
        attribute: &'static str,
        /// The value.
        value: u32,
        /// What is wrong with it.
        detail: String,
    },
    /// A controller or device refers to a controller index that does not exist, or a
    /// `<node>` that has no guest cell.
    #[error("{element}: {detail}")]
    Dangling {
        /// Location of the element.
        element: String,
        /// What it points at that is missing.
        detail: String,
    },
    /// The capabilities XML or the VMI manifest is unusable.
    #[error("{what}: {detail}")]
    Input {
        /// Which input.
        what: &'static str,
        /// What is wrong.
        detail: String,
    },
}
