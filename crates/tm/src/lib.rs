//! An exact simulator of the kubelet Topology Manager (hint providers, merge, policies, scopes) and the device manager's allocation.
