//! SWE-bench task instances and the files that carry them, in SWE-bench's form or
//! Multi-SWE-bench's.

mod environments;
mod file;
mod instance;
mod msb;
mod ordered;
mod parquet;
mod selection;
mod taskrepo;

pub use environments::{
    DEFAULT_DATASET, DatasetDate, DatasetDateError, DatasetProfile, dataset_names, dataset_profile,
    environments_date, parse_when, published_name, rfc3339,
};
pub use file::{
    DatasetError, DatasetsRead, ExportError, ExportFormat, TestListForm, dataset_bytes,
    export_bytes, python_json, read_dataset, read_datasets, records_bytes, to_record,
};
pub(crate) use file::{JsonText, json_or_lines};
pub use instance::{HARNESS_FIELDS, Instance, InstanceError, RowHarness, is_repo, json_type_name};
pub use msb::{
    LAYOUT_KEY, MsbError, MsbExportError, RowForm, harness_id, harness_work_tree, row_form,
};
pub use parquet::{ParquetError, is_parquet};
pub use selection::{OfInstance, Selection, SelectionError};
pub use taskrepo::{
    Content as TaskFileContent, Problem as TaskRepoProblem, SourceFile, TASK_KEY, TaskFile,
    TaskRecord, TaskRepoError, TaskRepoExportError, ToWrite, read_task_repo, task_repo_files,
    write_task_repo,
};
