"""sriov-operator: the operator-managed path (spec 12.2). SriovNetwork objects become source NADs;
SriovNetworkNodePolicy.spec.dra becomes per-policy DeviceAttributes and per-node
SriovResourcePolicy objects, the inputs the DRA driver already consumes."""
