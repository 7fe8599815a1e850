//! The entry arena: entries in file order with parent links, an id index, a children
//! index, labels, the session name, the replayed leaf and running stats.
//!
//! Entries reference each other by arena index (`u32`), never by pointer. A parent is
//! always an earlier entry (a `parent_id` naming no earlier entry makes a root), so the
//! parent links form a forest and every walk terminates; all walks are loops.

use std::collections::HashMap;

use std::hash::BuildHasher;
use std::sync::OnceLock;

use hashbrown::HashTable;

pub use crate::engine::types::{Kind, Role, ENTRY_TYPES, HEADER_TYPE, MESSAGE_ROLES};
use crate::engine::types::{ParsedEntry, UsageSums};

/// "No entry": a root's parent, a missing target, the leaf before any entry.
pub const NONE: u32 = u32::MAX;

/// Whole-session counts and usage sums (every branch).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stats {
    /// Entries in the arena.
    pub entry_count: u64,
    /// `message` entries of any role.
    pub message_count: u64,
    /// User messages.
    pub user_message_count: u64,
    /// Assistant messages.
    pub assistant_message_count: u64,
    /// Tool results.
    pub tool_result_count: u64,
    /// Usage summed over assistant messages, compactions and branch summaries.
    pub usage: UsageSums,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct StrRef {
    pub(super) start: u32,
    pub(super) len: u32,
}

/// One entry: its tree links and where its raw line lives.
#[derive(Debug, Clone)]
pub struct Node {
    /// Entry type.
    pub kind: Kind,
    /// Message role (messages only).
    pub role: Role,
    /// A compaction with a non-null `retained_tail`.
    pub retained_tail: bool,
    /// A later copy of an id already in the arena, kept as pi keeps it (pi files only): it
    /// is listed, counted and shown in the tree again, but the id names the first copy.
    pub repeat: bool,
    /// Parent index or [`NONE`].
    pub parent: u32,
    /// Leaf / label target, or a compaction's first kept entry; [`NONE`] if absent or unknown.
    pub target: u32,
    pub(super) first_child: u32,
    pub(super) last_child: u32,
    pub(super) next_sibling: u32,
    /// Byte offset of the line in the backing store.
    pub offset: u64,
    /// Line length in bytes, without the newline.
    pub len: u32,
    /// 1-based line number in the file (the header is line 1).
    pub line_no: u64,
    pub(super) id: StrRef,
    pub(super) ts: StrRef,
}

/// One entry of the id index: the arena index and 32 bits of its id's hash.
///
/// With the hash kept, growing the table never reads an id again, and a probe reads a
/// node and its id only when the hash matches: at a million entries those reads are cache
/// misses, and they made every append slower as the session grew.
#[derive(Debug, Clone, Copy)]
pub(super) struct IdSlot {
    idx: u32,
    tag: u32,
}

impl IdSlot {
    /// The table's hash of a tag: its position bits and its control bits both come from it.
    fn hash(tag: u32) -> u64 {
        (u64::from(tag) << 32) | u64::from(tag)
    }
}

/// A reference problem found while adding an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefProblem {
    /// The id is already in the session.
    DuplicateId,
    /// `parent_id` names no earlier entry.
    DanglingParent,
    /// A `leaf` entry's target is unknown.
    UnknownLeafTarget,
    /// A `label` entry's target is unknown.
    UnknownLabelTarget,
}

/// The in-memory index of one session.
pub struct Arena {
    pub(super) nodes: Vec<Node>,
    /// Ids and timestamps of every entry, back to back.
    pub(super) pool: String,
    /// id → arena index; built on first use after loading a persisted index, so a
    /// reopen that only walks parents never pays for it.
    pub(super) index: OnceLock<HashTable<IdSlot>>,
    hasher: foldhash::quality::RandomState,
    first_root: u32,
    last_root: u32,
    pub(super) labels: HashMap<u32, Box<str>, foldhash::quality::RandomState>,
    pub(super) unknown_types: HashMap<u32, Box<str>, foldhash::quality::RandomState>,
    pub(super) name: Option<Box<str>>,
    pub(super) leaf: u32,
    pub(super) newest: Option<StrRef>,
    pub(super) stats: Stats,
    /// The usage of each entry that has one (assistant messages, compactions, branch
    /// summaries), in index order: a fork sums the usage of what it copies from here
    /// instead of reading those lines again.
    pub(super) usages: Vec<(u32, UsageSums)>,
    /// How many nodes are repeats ([`Node::repeat`]).
    pub(super) repeats: u32,
}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

impl Arena {
    /// An empty arena.
    pub fn new() -> Self {
        Arena {
            nodes: Vec::new(),
            pool: String::new(),
            index: OnceLock::from(HashTable::new()),
            hasher: foldhash::quality::RandomState::default(),
            first_root: NONE,
            last_root: NONE,
            labels: HashMap::default(),
            unknown_types: HashMap::default(),
            name: None,
            leaf: NONE,
            newest: None,
            stats: Stats::default(),
            usages: Vec::new(),
            repeats: 0,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node at `idx`.
    pub fn node(&self, idx: u32) -> &Node {
        &self.nodes[idx as usize]
    }

    fn text(&self, r: StrRef) -> &str {
        &self.pool[r.start as usize..(r.start + r.len) as usize]
    }

    /// True when `r` is a valid slice of the pool.
    pub(super) fn in_pool(&self, r: StrRef) -> bool {
        (r.start as usize)
            .checked_add(r.len as usize)
            .is_some_and(|end| end <= self.pool.len())
            && self.pool.is_char_boundary(r.start as usize)
            && self.pool.is_char_boundary((r.start + r.len) as usize)
    }

    fn intern(&mut self, s: &str) -> StrRef {
        let start = self.pool.len() as u32;
        self.pool.push_str(s);
        StrRef {
            start,
            len: s.len() as u32,
        }
    }

    /// The id of the entry at `idx`.
    pub fn id(&self, idx: u32) -> &str {
        self.text(self.nodes[idx as usize].id)
    }

    /// The id of the last entry, if any.
    pub fn last_id(&self) -> Option<&str> {
        self.nodes.last().map(|n| self.text(n.id))
    }

    /// The timestamp of the entry at `idx`.
    pub fn timestamp(&self, idx: u32) -> &str {
        self.text(self.nodes[idx as usize].ts)
    }

    /// The `type` string of an unknown entry.
    pub fn unknown_type(&self, idx: u32) -> Option<&str> {
        self.unknown_types.get(&idx).map(|s| &**s)
    }

    /// The arena index of `id`.
    pub fn lookup(&self, id: &str) -> Option<u32> {
        let tag = self.tag(id);
        self.table()
            .find(IdSlot::hash(tag), |s| {
                s.tag == tag && self.text(self.nodes[s.idx as usize].id) == id
            })
            .map(|s| s.idx)
    }

    fn tag(&self, id: &str) -> u32 {
        (self.hasher.hash_one(id) >> 32) as u32
    }

    fn table(&self) -> &HashTable<IdSlot> {
        self.index.get_or_init(|| {
            let mut table = HashTable::with_capacity(self.nodes.len());
            for (i, node) in self.nodes.iter().enumerate().filter(|(_, n)| !n.repeat) {
                let tag = self.tag(self.text(node.id));
                table.insert_unique(IdSlot::hash(tag), IdSlot { idx: i as u32, tag }, |s| {
                    IdSlot::hash(s.tag)
                });
            }
            table
        })
    }

    /// The replayed leaf ([`NONE`] before the first entry or after a move to none).
    pub fn leaf(&self) -> u32 {
        self.leaf
    }

    /// The label currently on `idx`.
    pub fn label(&self, idx: u32) -> Option<&str> {
        self.labels.get(&idx).map(|s| &**s)
    }

    /// Every labelled entry with its label (unordered).
    pub fn labels(&self) -> impl Iterator<Item = (u32, &str)> {
        self.labels.iter().map(|(&i, s)| (i, &**s))
    }

    /// The session name from the last `session_info` entry.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The greatest entry timestamp (ISO strings compare in time order).
    pub fn newest_timestamp(&self) -> Option<&str> {
        self.newest.map(|r| self.text(r))
    }

    /// Whole-session stats.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The usage of entry `idx` as its line had it, if it has one.
    pub fn usage(&self, idx: u32) -> Option<UsageSums> {
        let at = self.usages.binary_search_by_key(&idx, |(i, _)| *i).ok()?;
        Some(self.usages[at].1)
    }

    /// Checks the references of `e` against the arena without changing it.
    ///
    /// Returns the resolved parent, target and problems. A `DuplicateId` problem means the
    /// entry must not be added.
    pub fn resolve(&self, e: &ParsedEntry<'_>) -> (u32, u32, Vec<RefProblem>) {
        let mut problems = Vec::new();
        if self.lookup(&e.id).is_some() {
            problems.push(RefProblem::DuplicateId);
        }
        let parent = match &e.parent_id {
            None => NONE,
            Some(pid) => self.lookup(pid).unwrap_or_else(|| {
                problems.push(RefProblem::DanglingParent);
                NONE
            }),
        };
        let target_name = match e.kind {
            crate::engine::Kind::Compaction => e.first_kept.as_deref(),
            _ => e.target_id.as_deref(),
        };
        let target = match target_name {
            None => NONE,
            Some(t) => match self.lookup(t) {
                Some(i) => i,
                None => {
                    match e.kind {
                        Kind::Leaf => problems.push(RefProblem::UnknownLeafTarget),
                        Kind::Label => problems.push(RefProblem::UnknownLabelTarget),
                        _ => {}
                    }
                    NONE
                }
            },
        };
        (parent, target, problems)
    }

    /// True when some entries are repeats of earlier ids ([`Node::repeat`]).
    pub fn has_repeats(&self) -> bool {
        self.repeats > 0
    }

    /// Adds an entry whose references were resolved by [`Arena::resolve`]; returns its index.
    ///
    /// The caller must not add an entry that `resolve` reported as a duplicate, unless as a
    /// `repeat` (pi's way with a re-flushed id: see [`Node::repeat`]).
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        e: &ParsedEntry<'_>,
        parent: u32,
        target: u32,
        offset: u64,
        len: u32,
        line_no: u64,
        repeat: bool,
    ) -> u32 {
        let idx = self.nodes.len() as u32;
        let id = self.intern(&e.id);
        let ts = self.intern(&e.timestamp);
        self.nodes.push(Node {
            kind: e.kind,
            role: e.role,
            retained_tail: e.retained_tail,
            repeat,
            parent,
            target,
            first_child: NONE,
            last_child: NONE,
            next_sibling: NONE,
            offset,
            len,
            line_no,
            id,
            ts,
        });
        if repeat {
            self.repeats += 1;
        } else {
            let tag = self.tag(&e.id);
            self.table();
            if let Some(table) = self.index.get_mut() {
                table.insert_unique(IdSlot::hash(tag), IdSlot { idx, tag }, |s| {
                    IdSlot::hash(s.tag)
                });
            }
        }
        self.link_child(parent, idx);
        if self.newest.is_none_or(|n| self.text(n) < &*e.timestamp) {
            self.newest = Some(ts);
        }
        match e.kind {
            Kind::Leaf => {
                if e.target_id.is_none() {
                    self.leaf = NONE;
                } else if target != NONE {
                    self.leaf = target;
                }
            }
            // pi's leaf is the last line; the id of a repeat names the first copy.
            _ if repeat => self.leaf = self.lookup(&e.id).unwrap_or(idx),
            _ => self.leaf = idx,
        }
        match e.kind {
            Kind::Label if target != NONE => match &e.text {
                Some(label) => {
                    self.labels.insert(target, label.as_ref().into());
                }
                None => {
                    self.labels.remove(&target);
                }
            },
            Kind::SessionInfo => self.name = e.text.as_deref().map(Into::into),
            Kind::Unknown => {
                self.unknown_types.insert(idx, e.type_name.as_ref().into());
            }
            _ => {}
        }
        self.count(e);
        if let Some(u) = e.usage {
            self.usages.push((idx, u));
        }
        idx
    }

    /// Makes room for `entries` entries in all, so a large load does not regrow (and
    /// rehash) as it goes.
    pub(super) fn reserve(&mut self, entries: usize) {
        let more = entries.saturating_sub(self.nodes.len());
        let per_entry = match self.nodes.len() {
            0 => 32,
            n => self.pool.len().div_ceil(n),
        };
        self.nodes.reserve(more);
        self.pool.reserve(more.saturating_mul(per_entry));
        if let Some(table) = self.index.get_mut() {
            // Each slot keeps its id's hash tag: growing the table reads no id.
            table.reserve(more, |s| IdSlot::hash(s.tag));
        }
    }

    pub(super) fn link_child(&mut self, parent: u32, idx: u32) {
        let (first, last) = if parent == NONE {
            (&mut self.first_root, &mut self.last_root)
        } else {
            let p = &mut self.nodes[parent as usize];
            (&mut p.first_child, &mut p.last_child)
        };
        let prev_last = *last;
        *last = idx;
        if prev_last == NONE {
            *first = idx;
        } else {
            self.nodes[prev_last as usize].next_sibling = idx;
        }
    }

    fn count(&mut self, e: &ParsedEntry<'_>) {
        let s = &mut self.stats;
        s.entry_count += 1;
        if e.kind == Kind::Message {
            s.message_count += 1;
            match e.role {
                Role::User => s.user_message_count += 1,
                Role::Assistant => s.assistant_message_count += 1,
                Role::ToolResult => s.tool_result_count += 1,
                _ => {}
            }
        }
        if let Some(u) = e.usage {
            s.usage.input += u.input;
            s.usage.output += u.output;
            s.usage.cache_read += u.cache_read;
            s.usage.cache_write += u.cache_write;
            s.usage.total_tokens += u.total_tokens;
            s.usage.cost_total += u.cost_total;
        }
    }

    /// The children of `parent` in file order ([`NONE`] lists the roots).
    pub fn children(&self, parent: u32) -> Children<'_> {
        let next = if parent == NONE {
            self.first_root
        } else {
            self.nodes[parent as usize].first_child
        };
        Children { arena: self, next }
    }

    /// The entries from the root down to `idx` (empty for [`NONE`]).
    pub fn path_to_root(&self, idx: u32) -> Vec<u32> {
        let mut path = Vec::new();
        let mut cur = idx;
        while cur != NONE {
            path.push(cur);
            cur = self.nodes[cur as usize].parent;
        }
        path.reverse();
        path
    }

    /// The path from `idx` up to the root or to the nearest compaction's cut (FORMAT.md),
    /// root-first.
    pub fn path_to_root_or_compaction(&self, idx: u32) -> Vec<u32> {
        let mut path = Vec::new();
        let mut cur = idx;
        while cur != NONE {
            path.push(cur);
            let node = &self.nodes[cur as usize];
            if node.kind == Kind::Compaction {
                if !node.retained_tail && node.target != NONE {
                    let at_compaction = path.len();
                    let mut up = node.parent;
                    let mut found = false;
                    while up != NONE {
                        path.push(up);
                        if up == node.target {
                            found = true;
                            break;
                        }
                        up = self.nodes[up as usize].parent;
                    }
                    if !found {
                        path.truncate(at_compaction);
                    }
                }
                break;
            }
            cur = node.parent;
        }
        path.reverse();
        path
    }

    /// Indices of the entries whose `type` is `type_name`, in file order.
    pub fn find(&self, type_name: &str) -> Vec<u32> {
        let kind = Kind::from_type(type_name);
        if kind == Kind::Header {
            return Vec::new();
        }
        (0..self.nodes.len() as u32)
            .filter(|&i| {
                let n = &self.nodes[i as usize];
                n.kind == kind && (kind != Kind::Unknown || self.unknown_type(i) == Some(type_name))
            })
            .collect()
    }

    /// Every entry of the subtree under `root` (itself included), parents before children.
    pub fn subtree(&self, root: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(i) = stack.pop() {
            out.push(i);
            let before = stack.len();
            stack.extend(self.children(i));
            stack[before..].reverse();
        }
        out
    }
}

/// Iterator over children in file order.
pub struct Children<'a> {
    arena: &'a Arena,
    next: u32,
}

impl Iterator for Children<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.next == NONE {
            return None;
        }
        let cur = self.next;
        self.next = self.arena.nodes[cur as usize].next_sibling;
        Some(cur)
    }
}
