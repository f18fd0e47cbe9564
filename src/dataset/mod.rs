//! SWE-bench task instances and the files that carry them.

mod file;
mod instance;

pub use file::{DatasetError, TestListForm, dataset_bytes, python_json, read_dataset, to_record};
pub use instance::{Instance, InstanceError, is_repo, json_type_name};
