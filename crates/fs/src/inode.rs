//! The two-way map between [`Node`]s and inode numbers, with the kernel's lookup counts.
//!
//! **Invariants**:
//! - While the kernel holds a reference (lookup count > 0), a node keeps the same inode number,
//!   so `tail -F` and `find` see a stable `st_ino` for a path.
//! - Inode numbers are never reused: a node forgotten by the kernel and looked up again gets a
//!   fresh number, so a stale number can never name a different node (the generation stays 0).
//! - The root is inode 1 and is never forgotten.
//!
//! Nodes listed by `readdir` get a number without a reference (the kernel does not count
//! `readdir` entries); they stay in the table until a lookup and its matching forget drop them.

use std::collections::HashMap;
use std::sync::Mutex;

use super::node::{DirNode, Node};

/// Inode number of the mount's root directory (FUSE_ROOT_ID).
pub const ROOT_INO: u64 = 1;

/// Node <-> inode number, with lookup counts. Thread-safe; the lock is held only for map
/// operations, never across calls into a source.
#[derive(Debug)]
pub struct InodeTable {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    by_node: HashMap<Node, u64>,
    by_ino: HashMap<u64, Slot>,
    /// **Invariant**: greater than every number ever handed out.
    next_ino: u64,
}

#[derive(Debug)]
struct Slot {
    node: Node,
    /// References the kernel holds (sum of lookups minus sum of forgets).
    lookups: u64,
}

impl Default for InodeTable {
    fn default() -> Self {
        InodeTable::new()
    }
}

impl InodeTable {
    /// A table holding only the root.
    pub fn new() -> InodeTable {
        let mut inner =
            Inner { by_node: HashMap::new(), by_ino: HashMap::new(), next_ino: ROOT_INO + 1 };
        inner.by_node.insert(Node::Dir(DirNode::Root), ROOT_INO);
        inner.by_ino.insert(ROOT_INO, Slot { node: Node::Dir(DirNode::Root), lookups: 0 });
        InodeTable { inner: Mutex::new(inner) }
    }

    /// The node an inode number stands for, if the number is live.
    pub fn node(&self, ino: u64) -> Option<Node> {
        self.lock().by_ino.get(&ino).map(|slot| slot.node.clone())
    }

    /// The inode number of `node`, taking one kernel reference (a successful `lookup`, `mkdir`
    /// or `create` reply).
    pub fn lookup(&self, node: &Node) -> u64 {
        let mut inner = self.lock();
        let ino = inner.ino_for(node);
        if let Some(slot) = inner.by_ino.get_mut(&ino) {
            slot.lookups = slot.lookups.saturating_add(1);
        }
        ino
    }

    /// The inode number of `node` without taking a reference (for `readdir` entries).
    pub fn peek(&self, node: &Node) -> u64 {
        self.lock().ino_for(node)
    }

    /// The inode number of `node` if it has one, without assigning one.
    pub fn find(&self, node: &Node) -> Option<u64> {
        self.lock().by_node.get(node).copied()
    }

    /// Drops `nlookup` kernel references; the node leaves the table when none are left.
    /// Returns whether the inode number is now dead.
    pub fn forget(&self, ino: u64, nlookup: u64) -> bool {
        if ino == ROOT_INO {
            return false;
        }
        let mut inner = self.lock();
        let Some(slot) = inner.by_ino.get_mut(&ino) else {
            return true;
        };
        slot.lookups = slot.lookups.saturating_sub(nlookup);
        if slot.lookups > 0 {
            return false;
        }
        if let Some(slot) = inner.by_ino.remove(&ino) {
            inner.by_node.remove(&slot.node);
        }
        true
    }

    /// Number of live inodes (the root included).
    pub fn len(&self) -> usize {
        self.lock().by_ino.len()
    }

    /// Whether only the root is live.
    pub fn is_empty(&self) -> bool {
        self.len() <= 1
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock leaves the maps consistent (each operation is a few
        // map calls), so a poisoned lock is still usable.
        topicfs_source::sync::lock(&self.inner)
    }
}

impl Inner {
    fn ino_for(&mut self, node: &Node) -> u64 {
        if let Some(&ino) = self.by_node.get(node) {
            return ino;
        }
        let ino = self.next_ino;
        self.next_ino = self.next_ino.saturating_add(1);
        self.by_node.insert(node.clone(), ino);
        self.by_ino.insert(ino, Slot { node: node.clone(), lookups: 0 });
        ino
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str) -> Node {
        Node::Dir(DirNode::Topic(name.to_string()))
    }

    #[test]
    fn a_node_keeps_its_number_while_referenced() {
        let table = InodeTable::new();
        let a = table.lookup(&topic("a"));
        assert_eq!(table.lookup(&topic("a")), a);
        assert_eq!(table.peek(&topic("a")), a);
        table.forget(a, 1);
        assert_eq!(table.node(a), Some(topic("a")));
        table.forget(a, 1);
        assert_eq!(table.node(a), None);
    }

    #[test]
    fn forgotten_numbers_are_never_reused() {
        let table = InodeTable::new();
        let a = table.lookup(&topic("a"));
        table.forget(a, 1);
        let again = table.lookup(&topic("a"));
        assert_ne!(again, a);
        let b = table.lookup(&topic("b"));
        assert!(b != a && b != again);
    }

    #[test]
    fn root_survives_forget() {
        let table = InodeTable::new();
        table.forget(ROOT_INO, 100);
        assert_eq!(table.node(ROOT_INO), Some(Node::Dir(DirNode::Root)));
        assert!(table.is_empty());
    }
}
