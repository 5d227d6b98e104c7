//! TOML → validated profiles. Everything that can be checked before a process starts is checked here, once.

mod build;
mod contract;
mod device;
mod field;
mod fields;
mod load;
mod qualify;

pub use build::{BuildSpec, DEFAULT_BUILD_TIMEOUT};
pub use contract::{ManifestFile, schema, schema_text};
pub use device::{Device, DeviceError};
pub use field::{parse_mooncake, parse_sharegpt};
pub use fields::MAX_FILE_BYTES;
pub(crate) use load::executable_problem;
pub use load::{
    AttachSpec, DIALECTS, DraftSpec, MANIFEST_VERSION, Manifest, ManifestError, ModelSpec, PathTable, Profile,
    SpawnSpec, Target,
};
pub use qualify::{
    DriftLimits, LmEval, QualifySettings, Quality, QualitySet, RATE_RANGE, Stage, lm_eval_task_ok, read_corpus,
    workload_problem,
};
