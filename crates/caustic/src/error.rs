//! One error type for everything the facade does, so a caller matches one
//! enum (or prints one message) whichever layer failed.

use caustic_accel::AccelSpecError;
use caustic_render::image_io::ImageError;
use caustic_render::photon::PhotonRenderError;
use caustic_render::sppm::SppmError;
use caustic_scene::SceneError;

/// What can go wrong between a scene and an image. Every message names
/// what failed and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A scene file could not be read or is not a valid scene.
    #[error(transparent)]
    Scene(#[from] SceneError),

    /// Neither a scene file nor the name of a built-in scene.
    #[error("{name}: no such file, and not a built-in scene (built-in: {builtins})")]
    NoScene { name: String, builtins: String },

    /// An acceleration-structure spec the registry rejects: unknown name,
    /// unknown parameter or a value out of range.
    #[error(transparent)]
    AccelSpec(#[from] AccelSpecError),

    /// A device string that is none of `auto`, `cpu`, `cuda`, `cuda:N`,
    /// `cuda:N,M,…`, `cuda:all`, or a set of devices the machine lacks.
    #[error("unknown device `{0}`: expected auto, cpu, cuda, cuda:N, cuda:N,M,... or cuda:all")]
    BadDevice(String),

    /// A point structure name that is none of `kdtree`, `hashgrid`, `brute`.
    #[error("unknown photon-map structure `{0}`: expected kdtree, hashgrid or brute")]
    BadPhotonMap(String),

    /// `cuda` was asked for, but this build has no GPU backend.
    #[error(
        "{device} was asked for, but caustic was built without CUDA support; rebuild with the default `cuda` feature, or use `cpu` or `auto`"
    )]
    NoCudaFeature { device: String },

    /// The work was sent to the GPU explicitly, but has no GPU version.
    #[error("{what} runs on the CPU only: {hint}")]
    CpuOnly { what: String, hint: String },

    /// The camera frame is degenerate.
    #[error(
        "the camera is degenerate (eye equal to target, up parallel to the view, or a field of view outside (0, 180) degrees): {0}"
    )]
    Camera(String),

    /// Render settings the renderer cannot use.
    #[error("invalid {integrator} settings: {message}")]
    Settings {
        integrator: &'static str,
        message: String,
    },

    /// The photon mapper's settings are invalid (or unsupported on the GPU).
    #[error(transparent)]
    Photon(#[from] PhotonRenderError),

    /// The SPPM settings are invalid.
    #[error(transparent)]
    Sppm(#[from] SppmError),

    /// A render shared by several processes (`Renderer::team`) failed to
    /// exchange its work, or was asked for what a team render cannot give.
    #[error("team render: {0}")]
    Team(#[from] caustic_render::team::TeamError),

    /// An image could not be written or read.
    #[error(transparent)]
    Image(#[from] ImageError),

    /// The CUDA backend failed: no driver, out of memory, a kernel fault.
    #[cfg(feature = "cuda")]
    #[error(transparent)]
    Gpu(#[from] caustic_gpu::GpuError),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(feature = "cuda")]
impl From<caustic_render::photon::render_cuda::GpuPhotonError> for Error {
    fn from(error: caustic_render::photon::render_cuda::GpuPhotonError) -> Self {
        use caustic_render::photon::render_cuda::GpuPhotonError as E;
        match error {
            E::Settings(e) => e.into(),
            E::Gpu(e) => e.into(),
            E::Team(e) => e.into(),
        }
    }
}

#[cfg(feature = "cuda")]
impl From<caustic_render::team_cuda::GpuTeamError> for Error {
    fn from(error: caustic_render::team_cuda::GpuTeamError) -> Self {
        use caustic_render::team_cuda::GpuTeamError as E;
        match error {
            E::Gpu(e) => e.into(),
            E::Team(e) => e.into(),
        }
    }
}

#[cfg(feature = "cuda")]
impl From<caustic_render::sppm::SppmCudaError> for Error {
    fn from(error: caustic_render::sppm::SppmCudaError) -> Self {
        use caustic_render::sppm::SppmCudaError as E;
        match error {
            E::Settings(e) => e.into(),
            E::Gpu(e) => e.into(),
        }
    }
}
