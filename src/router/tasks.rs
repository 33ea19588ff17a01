//! Task ids (the 2026-07-28 tasks extension): `tasks/get|update|cancel`
//! carry only a `taskId`, so the gateway must know which backend made it.
//! With prefixed names the id itself says (`{backend}__{id}`); unprefixed,
//! a bounded index remembers the backend of each task it has seen.

use std::collections::{HashMap, VecDeque};

/// Tasks remembered per namespace; the oldest is forgotten beyond this.
const MAX_TASKS: usize = 10_000;

#[derive(Default)]
pub(super) struct TaskIndex {
    owner: HashMap<String, usize>,
    order: VecDeque<String>,
}

impl TaskIndex {
    pub(super) fn remember(&mut self, task: &str, member: usize) {
        if self.owner.insert(task.to_owned(), member).is_none() {
            self.order.push_back(task.to_owned());
            if self.order.len() > MAX_TASKS
                && let Some(old) = self.order.pop_front()
            {
                self.owner.remove(&old);
            }
        }
    }

    pub(super) fn owner(&self, task: &str) -> Option<usize> {
        self.owner.get(task).copied()
    }

    pub(super) fn len(&self) -> usize {
        self.owner.len()
    }
}

/// Where a result names its task: `taskId` at the top (a task's status,
/// 2026-07-28 tasks) or in `task` (2025-11-25's `CreateTaskResult`).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum TaskAt {
    Top(String),
    Nested(String),
}

/// The task a result names, located without parsing results that cannot
/// have one.
pub(super) fn task_id(result: &serde_json::value::RawValue) -> Option<TaskAt> {
    static TASK_ID: crate::jsonrpc::Needle = crate::jsonrpc::Needle::new("\"taskId\"");
    if !TASK_ID.in_text(result.get()) {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct T {
        #[serde(rename = "taskId")]
        task_id: Option<String>,
        task: Option<Inner>,
    }
    #[derive(serde::Deserialize)]
    struct Inner {
        #[serde(rename = "taskId")]
        task_id: String,
    }
    let t = serde_json::from_str::<T>(result.get()).ok()?;
    match (t.task_id, t.task) {
        (Some(id), _) => Some(TaskAt::Top(id)),
        (None, Some(inner)) => Some(TaskAt::Nested(inner.task_id)),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_are_found_flat_and_nested() {
        let raw = |s: &str| serde_json::value::RawValue::from_string(s.into()).unwrap();
        assert_eq!(
            task_id(&raw(r#"{"taskId":"a","status":"working"}"#)),
            Some(TaskAt::Top("a".into()))
        );
        assert_eq!(
            task_id(&raw(r#"{"task":{"taskId":"b","status":"working"}}"#)),
            Some(TaskAt::Nested("b".into()))
        );
        assert_eq!(task_id(&raw(r#"{"content":[]}"#)), None);
    }

    #[test]
    fn the_index_is_bounded() {
        let mut ix = TaskIndex::default();
        for i in 0..MAX_TASKS + 5 {
            ix.remember(&format!("t{i}"), i % 3);
        }
        assert_eq!(ix.owner.len(), MAX_TASKS);
        assert_eq!(ix.owner("t0"), None);
        assert_eq!(
            ix.owner(&format!("t{}", MAX_TASKS + 4)),
            Some((MAX_TASKS + 4) % 3)
        );
    }
}
