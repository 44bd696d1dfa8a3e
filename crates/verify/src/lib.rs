//! In-pod (or host) verification of GPU/NIC alignment from /dev, environment variables and sysfs.
