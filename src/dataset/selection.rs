//! Which instances a command works on: every one, the ids given (each must exist: an id that
//! selects nothing is a mistake to say, not a run that silently skips it), and optionally only
//! those of one repository. One type for every command that takes `--instance-ids`.

use super::Instance;

/// Something that belongs to one instance (an instance, a prediction, a bundle row, …).
pub trait OfInstance {
    fn instance_id(&self) -> &str;
    /// Its repository, when it knows it.
    fn repo(&self) -> Option<&str> {
        None
    }
}

impl OfInstance for Instance {
    fn instance_id(&self) -> &str {
        &self.instance_id
    }
    fn repo(&self) -> Option<&str> {
        Some(&self.repo)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Only these instances (empty: every one).
    pub ids: Vec<String>,
    /// Only the instances of this repository.
    pub repo: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    #[error("--instance-ids names {} instance(s) {among}: {}", .missing.len(), .missing.join(", "))]
    Unknown {
        missing: Vec<String>,
        among: &'static str,
    },
    #[error("the archive has no instances of {0}")]
    NoSuchRepo(String),
}

impl Selection {
    /// Every instance.
    pub fn all() -> Selection {
        Selection::default()
    }

    /// These instances (every one when `ids` is empty).
    pub fn ids(ids: Vec<String>) -> Selection {
        Selection { ids, repo: None }
    }

    pub fn names_ids(&self) -> bool {
        !self.ids.is_empty()
    }

    /// Whether `id` (of `repo`, when known) is selected.
    pub fn contains(&self, id: &str, repo: Option<&str>) -> bool {
        (self.ids.is_empty() || self.ids.iter().any(|i| i == id))
            && match (&self.repo, repo) {
                (Some(wanted), Some(r)) => wanted == r,
                _ => true,
            }
    }

    /// The selected items of `items`, in their order. Every id given must select at least one
    /// item, and a repository given must have one; otherwise the error lists every id that
    /// selects nothing, saying they are `among` (e.g. "not in the archive").
    pub fn pick<T: OfInstance>(
        &self,
        items: Vec<T>,
        among: &'static str,
    ) -> Result<Vec<T>, SelectionError> {
        let mut missing: Vec<String> = self
            .ids
            .iter()
            .filter(|id| !items.iter().any(|t| t.instance_id() == id.as_str()))
            .cloned()
            .collect();
        missing.dedup();
        if !missing.is_empty() {
            return Err(SelectionError::Unknown { missing, among });
        }
        if let Some(repo) = &self.repo
            && !items.iter().any(|t| t.repo() == Some(repo.as_str()))
        {
            return Err(SelectionError::NoSuchRepo(repo.clone()));
        }
        Ok(items
            .into_iter()
            .filter(|t| self.contains(t.instance_id(), t.repo()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Item(&'static str, &'static str);
    impl OfInstance for Item {
        fn instance_id(&self) -> &str {
            self.0
        }
        fn repo(&self) -> Option<&str> {
            Some(self.1)
        }
    }

    fn items() -> Vec<Item> {
        vec![
            Item("a__b-1", "a/b"),
            Item("a__b-2", "a/b"),
            Item("c__d-1", "c/d"),
        ]
    }

    #[test]
    fn unknown_ids_are_listed_all_at_once() {
        let s = Selection::ids(vec!["a__b-1".into(), "x-1".into(), "y-2".into()]);
        let err = s
            .pick(items(), "not in the archive")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("--instance-ids names 2 instance(s) not in the archive: x-1, y-2")
        );
    }

    #[test]
    fn ids_and_repo_narrow_in_order() {
        let all = Selection::all().pick(items(), "").unwrap();
        assert_eq!(all.len(), 3);
        let s = Selection {
            ids: vec![],
            repo: Some("a/b".into()),
        };
        let picked: Vec<&str> = s.pick(items(), "").unwrap().iter().map(|i| i.0).collect();
        assert_eq!(picked, ["a__b-1", "a__b-2"]);
        let none = Selection {
            ids: vec![],
            repo: Some("e/f".into()),
        };
        assert_eq!(
            none.pick(items(), "").err(),
            Some(SelectionError::NoSuchRepo("e/f".into()))
        );
    }
}
