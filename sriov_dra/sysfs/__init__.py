"""The only code that touches /sys: PF/VF discovery and VF kernel-driver binding."""
