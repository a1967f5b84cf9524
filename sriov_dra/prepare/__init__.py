"""NodePrepareResources and NodeUnprepareResources for managed bindings, step by step.

In order: resolve and verify the consuming Pod (consumer), take claim-then-Pod locks (locks), plan
and render every VF's shadow (sriov_dra.core), prepare the VF and checkpoint it Pending (host),
create the shadow NAD (shadows), merge the Pod's network selections (podnetworks), mark the
binding Ready, and report status.devices (devicestatus). Release runs the same steps backwards."""
