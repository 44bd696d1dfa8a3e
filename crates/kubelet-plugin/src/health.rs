//! Device health: a snapshot of every published device's health, changed through
//! [`HealthBoard::set`], streamed to the kubelet by `NodeWatchResources` (the full list
//! on start and after every change).

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use topoalign_dra::publish::Inventory;

/// A device's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Health {
    /// Working.
    Healthy,
    /// Reported a problem.
    Unhealthy,
    /// Cannot be told.
    Unknown,
}

/// One published device's health at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceHealthEntry {
    /// Pool (the node name).
    pub pool: String,
    /// Published device name.
    pub device: String,
    /// Its health: the worst of the hardware it stands for.
    pub health: Health,
    /// Unix seconds of the last change.
    pub last_updated: i64,
}

/// The health of the node's hardware (GPUs and physical NICs by their device names) and
/// of every published device derived from it (a pair is as healthy as its worse half).
#[derive(Debug)]
pub(crate) struct HealthBoard {
    pool: String,
    /// Published device → the hardware names it stands for.
    devices: Vec<(String, Vec<String>)>,
    hardware: BTreeMap<String, Health>,
    tx: watch::Sender<Vec<DeviceHealthEntry>>,
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl HealthBoard {
    /// Every device healthy.
    pub(crate) fn new(pool: &str, inventory: &Inventory) -> Self {
        let devices: Vec<(String, Vec<String>)> = inventory
            .devices()
            .iter()
            .map(|d| {
                let parts = d
                    .gpu()
                    .map(|g| g.name.clone())
                    .into_iter()
                    .chain(d.nic().map(|n| n.name.clone()))
                    .collect();
                (d.name().to_string(), parts)
            })
            .collect();
        let hardware = inventory
            .gpus
            .iter()
            .map(|g| g.name.clone())
            .chain(inventory.nics.iter().map(|n| n.name.clone()))
            .map(|n| (n, Health::Healthy))
            .collect();
        let mut board = Self {
            pool: pool.to_string(),
            devices,
            hardware,
            tx: watch::channel(Vec::new()).0,
        };
        let snapshot = board.snapshot(&BTreeMap::new());
        board.tx = watch::channel(snapshot).0;
        board
    }

    fn snapshot(&self, previous: &BTreeMap<String, (Health, i64)>) -> Vec<DeviceHealthEntry> {
        let t = now();
        self.devices
            .iter()
            .map(|(name, parts)| {
                let health = parts
                    .iter()
                    .map(|p| self.hardware.get(p).copied().unwrap_or(Health::Unknown))
                    .max_by_key(|h| match h {
                        Health::Healthy => 0,
                        Health::Unknown => 1,
                        Health::Unhealthy => 2,
                    })
                    .unwrap_or(Health::Unknown);
                let last_updated = match previous.get(name) {
                    Some((h, at)) if *h == health => *at,
                    _ => t,
                };
                DeviceHealthEntry {
                    pool: self.pool.clone(),
                    device: name.clone(),
                    health,
                    last_updated,
                }
            })
            .collect()
    }

    /// Sets the health of a GPU or physical NIC (by its device name); returns false for a
    /// name the inventory does not have. Subscribers get a new full list if anything
    /// changed.
    pub(crate) fn set(&mut self, hardware: &str, health: Health) -> bool {
        let Some(slot) = self.hardware.get_mut(hardware) else {
            return false;
        };
        if *slot == health {
            return true;
        }
        *slot = health;
        self.publish();
        true
    }

    /// Sends subscribers the full list again; a device whose health did not change
    /// keeps its `last_updated`.
    fn publish(&mut self) {
        let previous = self
            .tx
            .borrow()
            .iter()
            .map(|e| (e.device.clone(), (e.health, e.last_updated)))
            .collect();
        let next = self.snapshot(&previous);
        self.tx.send_replace(next);
    }

    /// Takes the device list of a new inventory (hot-plug): hardware known before keeps
    /// its health, new hardware starts healthy; subscribers get the new full list.
    pub(crate) fn set_inventory(&mut self, inventory: &Inventory) {
        let fresh = Self::new(&self.pool, inventory);
        let hardware = fresh
            .hardware
            .into_iter()
            .map(|(name, h)| {
                let kept = self.hardware.get(&name).copied().unwrap_or(h);
                (name, kept)
            })
            .collect();
        self.devices = fresh.devices;
        self.hardware = hardware;
        self.publish();
    }

    /// A receiver of the full list, current value first.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Vec<DeviceHealthEntry>> {
        self.tx.subscribe()
    }
}
