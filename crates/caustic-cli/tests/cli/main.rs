//! End-to-end tests of the `caustic` binary: every subcommand on built-in
//! scenes (and small files written here) at tiny sizes, each integrator,
//! the device choice on a machine without a GPU, and the errors a user
//! meets. They run the binary cargo built for this test run.

mod accel;
mod animation;
mod browser;
mod cameras;
mod cdp;
mod common;
mod errors;
mod render;
mod subcommands;
mod view;
mod view_server;
