// accel_layout.cuh for the host emulation: nothing to check against (see
// layout_check.cuh beside it).
#pragma once
