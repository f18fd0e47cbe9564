//! Instances, the datasets they came from, and the pull requests a collection looked at.

use rusqlite::{Connection, OptionalExtension, params};

use crate::dataset::{DatasetDate, Instance};

use super::{Index, IndexError};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InstanceRow {
    pub instance_id: String,
    pub repo: String,
    pub base_commit: String,
    pub version: String,
    pub created_at: String,
    pub added_at: i64,
    pub updated_at: i64,
}

/// Adds `instance`, or replaces the stored one of the same id.
pub(super) fn upsert_instance(
    conn: &Connection,
    instance: &Instance,
    t: i64,
) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO instances (instance_id, repo, base_commit, version, created_at,
             environment_setup_commit, data, added_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)
         ON CONFLICT(instance_id) DO UPDATE SET repo = ?2, base_commit = ?3, version = ?4,
             created_at = ?5, environment_setup_commit = ?6, data = ?7, updated_at = ?8",
        params![
            instance.instance_id,
            instance.repo,
            instance.base_commit,
            instance.version,
            instance.created_at,
            instance.environment_setup_commit,
            String::from_utf8_lossy(&instance.to_canonical_json()),
            t,
        ],
    )
    .map(|_| ())
}

impl Index {
    /// Adds or replaces `instances`, all in one transaction: either every one is in, or none.
    /// With a dataset, it is recorded (or updated) and the instances belong to it. Returns how
    /// many were new.
    pub fn import_instances(
        &mut self,
        instances: &[Instance],
        dataset: Option<&DatasetDate>,
    ) -> Result<usize, IndexError> {
        self.import_by_dataset(&[(dataset, instances)])
    }

    /// [`Index::import_instances`] of several groups, each of its own dataset, in one
    /// transaction.
    pub fn import_by_dataset(
        &mut self,
        groups: &[(Option<&DatasetDate>, &[Instance])],
    ) -> Result<usize, IndexError> {
        self.write(|tx, t| {
            let mut new = 0;
            for (dataset, instances) in groups {
                if let Some(d) = dataset {
                    tx.execute(
                        "INSERT INTO datasets (name, environments_as_of, rule, added_at, updated_at)
                         VALUES (?1, ?2, ?3, ?4, ?4)
                         ON CONFLICT(name) DO UPDATE SET environments_as_of = ?2, rule = ?3,
                             updated_at = ?4",
                        params![d.name, d.environments_as_of, d.rule, t],
                    )?;
                }
                for inst in *instances {
                    let exists: bool = tx.query_row(
                        "SELECT EXISTS(SELECT 1 FROM instances WHERE instance_id = ?1)",
                        [&inst.instance_id],
                        |r| r.get(0),
                    )?;
                    if !exists {
                        new += 1;
                    }
                    upsert_instance(tx, inst, t)?;
                    if let Some(d) = dataset {
                        tx.execute(
                            "UPDATE instances SET dataset = ?2 WHERE instance_id = ?1",
                            params![inst.instance_id, d.name],
                        )?;
                    }
                }
            }
            Ok(new)
        })
    }

    /// The datasets the instances of `repo` `version` were imported from (none for collected
    /// instances), each once.
    pub fn datasets_of(&self, repo: &str, version: &str) -> Result<Vec<DatasetDate>, IndexError> {
        self.rows(
            "SELECT DISTINCT d.name, d.environments_as_of, d.rule
             FROM instances i JOIN datasets d ON d.name = i.dataset
             WHERE i.repo = ?1 AND i.version = ?2 ORDER BY d.name",
            [repo, version],
            |c| {
                Ok(DatasetDate {
                    name: c.get(0)?,
                    environments_as_of: c.get(1)?,
                    rule: c.get(2)?,
                })
            },
        )
    }

    /// The dataset instance `instance_id` was imported from, with its environments date (none
    /// for a collected instance).
    pub fn dataset_of(&self, instance_id: &str) -> Result<Option<DatasetDate>, IndexError> {
        Ok(self
            .rows(
                "SELECT d.name, d.environments_as_of, d.rule
                 FROM instances i JOIN datasets d ON d.name = i.dataset
                 WHERE i.instance_id = ?1",
                [instance_id],
                |c| {
                    Ok(DatasetDate {
                        name: c.get(0)?,
                        environments_as_of: c.get(1)?,
                        rule: c.get(2)?,
                    })
                },
            )?
            .into_iter()
            .next())
    }

    fn parse_instance(&self, instance_id: &str, data: &str) -> Result<Instance, IndexError> {
        Instance::from_json(data.as_bytes()).map_err(|e| IndexError::Corrupt {
            path: self.path.clone(),
            detail: format!("instance `{instance_id}`: {e}"),
        })
    }

    pub fn instances(&self) -> Result<Vec<InstanceRow>, IndexError> {
        self.rows(
            "SELECT instance_id, repo, base_commit, version, created_at, added_at, updated_at
             FROM instances ORDER BY instance_id",
            [],
            |c| {
                Ok(InstanceRow {
                    instance_id: c.get(0)?,
                    repo: c.get(1)?,
                    base_commit: c.get(2)?,
                    version: c.get(3)?,
                    created_at: c.get(4)?,
                    added_at: c.get(5)?,
                    updated_at: c.get(6)?,
                })
            },
        )
    }

    /// Every stored instance, parsed, in the order they first entered the index (so a dataset
    /// imported into an empty archive exports in its own order).
    pub fn all_instances(&self) -> Result<Vec<Instance>, IndexError> {
        self.rows(
            "SELECT instance_id, data FROM instances ORDER BY rowid",
            [],
            |c| self.parse_instance(&c.get::<String>(0)?, &c.get::<String>(1)?),
        )
    }

    /// The stored instance, parsed.
    pub fn instance(&self, instance_id: &str) -> Result<Option<Instance>, IndexError> {
        let data: Option<String> = self
            .conn
            .query_row(
                "SELECT data FROM instances WHERE instance_id = ?1",
                [instance_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err())?;
        data.map(|d| self.parse_instance(instance_id, &d))
            .transpose()
    }

    /// Instances of repository `repo` (OWNER/NAME), with the commits they need.
    pub fn instances_of_repo(&self, repo: &str) -> Result<Vec<InstanceRow>, IndexError> {
        Ok(self
            .instances()?
            .into_iter()
            .filter(|i| i.repo.eq_ignore_ascii_case(repo))
            .collect())
    }

    /// Records what became of pull request `number` of `repo`, with its instance if it gave
    /// one, in one transaction.
    pub fn record_pull(
        &mut self,
        repo: &str,
        number: u64,
        skipped_because: Option<&str>,
        instance: Option<&Instance>,
    ) -> Result<(), IndexError> {
        self.write(|tx, t| {
            if let Some(inst) = instance {
                upsert_instance(tx, inst, t)?;
            }
            tx.execute(
                "INSERT INTO collected_pulls (repo, number, outcome, reason, instance_id,
                                              collected_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(repo, number) DO UPDATE SET outcome = ?3, reason = ?4,
                     instance_id = ?5, collected_at = ?6",
                params![
                    repo,
                    number as i64,
                    if instance.is_some() {
                        "instance"
                    } else {
                        "skipped"
                    },
                    skipped_because.unwrap_or_default(),
                    instance.map(|i| i.instance_id.as_str()).unwrap_or_default(),
                    t
                ],
            )?;
            Ok(())
        })
    }

    /// The pull requests of `repo` whose outcome is recorded.
    pub fn collected_pulls(
        &self,
        repo: &str,
    ) -> Result<std::collections::HashSet<u64>, IndexError> {
        let numbers = self.rows(
            "SELECT number FROM collected_pulls WHERE repo = ?1",
            [repo],
            |c| c.count(0),
        )?;
        Ok(numbers.into_iter().collect())
    }
}
