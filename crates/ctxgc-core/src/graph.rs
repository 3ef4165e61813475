//! Sequence edges between items (`parent_id`, `edge_injection`), kept up to date as items are
//! appended, with cycle detection (strongly connected components, Kosaraju's algorithm, which
//! walks with an explicit stack: a cycle of any length never reaches the call stack) and a
//! deterministic topological render order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

const END: u32 = u32::MAX;

/// Adjacency lists in two flat arrays (a linked list of edges per node): appending an edge
/// allocates nothing per node, which matters at a million events.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Adjacency {
    head: Vec<u32>,
    /// `(neighbour, next edge of the same node)`.
    edges: Vec<(u32, u32)>,
}

impl Adjacency {
    fn grow(&mut self, len: usize) {
        if self.head.len() < len {
            self.head.resize(len, END);
        }
    }

    fn push(&mut self, from: usize, to: usize) {
        let e = self.edges.len() as u32;
        self.edges.push((to as u32, self.head[from]));
        self.head[from] = e;
    }

    fn iter(&self, from: usize) -> impl Iterator<Item = usize> + '_ {
        let mut e = self.head.get(from).copied().unwrap_or(END);
        std::iter::from_fn(move || {
            if e == END {
                return None;
            }
            let (to, next) = self.edges[e as usize];
            e = next;
            Some(to as usize)
        })
    }
}

/// The sequence graph. Edges point from parent to child.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Graph {
    parents: Adjacency,
    children: Adjacency,
    /// Edges added since the passes last looked, `(parent, child)`.
    fresh: Vec<(usize, usize)>,
    /// Whether some edge points from a later item to an earlier one. Only then can a cycle
    /// exist, and only then does the render order differ from input order.
    has_back_edges: bool,
    /// Set when a back edge was added since the last [`Graph::refresh`].
    dirty: bool,
    /// Strongly connected components with more than one item, each sorted, in order of their
    /// first item.
    cycles: Vec<Vec<usize>>,
    /// Render order when back edges exist; `None` means input order.
    order: Option<Vec<usize>>,
}

impl Graph {
    /// Makes room for items up to `len`.
    pub fn grow(&mut self, len: usize) {
        self.parents.grow(len);
        self.children.grow(len);
    }

    /// Adds the edge `parent → child`. Returns false (and adds nothing) for a self-loop.
    pub fn add_edge(&mut self, parent: usize, child: usize) -> bool {
        if parent == child {
            return false;
        }
        self.grow(parent.max(child) + 1);
        if self.children.iter(parent).any(|c| c == child) {
            return true;
        }
        self.children.push(parent, child);
        self.parents.push(child, parent);
        self.fresh.push((parent, child));
        if parent > child {
            self.has_back_edges = true;
            self.dirty = true;
        }
        true
    }

    /// Parents of an item.
    pub fn parents(&self, item: usize) -> impl Iterator<Item = usize> + '_ {
        self.parents.iter(item)
    }

    /// Children of an item.
    pub fn children(&self, item: usize) -> impl Iterator<Item = usize> + '_ {
        self.children.iter(item)
    }

    /// Takes the edges added since the last call.
    pub fn take_fresh_edges(&mut self) -> Vec<(usize, usize)> {
        std::mem::take(&mut self.fresh)
    }

    /// The cyclic components, as of the last [`Graph::refresh`].
    pub fn cycles(&self) -> &[Vec<usize>] {
        &self.cycles
    }

    /// The render order, as of the last [`Graph::refresh`]: `None` means input order.
    pub fn order(&self) -> Option<&[usize]> {
        self.order.as_deref()
    }

    /// Recomputes cycles and render order over the first `len` items if a back edge was
    /// added. Cost is linear in the graph, paid only when the input is out of order.
    ///
    /// Items from `len` on may already be linked (a batch appended, then compiled one item at
    /// a time): their edges are left out until a refresh covers them.
    pub fn refresh(&mut self, len: usize) {
        self.grow(len);
        if !self.dirty {
            if let Some(order) = &mut self.order {
                // Items appended since the last refresh without back edges go last, in order.
                let known = order.len();
                order.extend(known..len);
            }
            return;
        }
        // Edges to items not covered yet still count once a refresh reaches them.
        self.dirty = len < self.children.head.len();
        let mut pg = petgraph::graph::DiGraph::<(), ()>::with_capacity(len, 0);
        for _ in 0..len {
            pg.add_node(());
        }
        for parent in 0..len {
            for child in self.children.iter(parent).filter(|&c| c < len) {
                pg.add_edge(
                    petgraph::graph::NodeIndex::new(parent),
                    petgraph::graph::NodeIndex::new(child),
                    (),
                );
            }
        }
        let mut component = vec![usize::MAX; len];
        let mut members: Vec<Vec<usize>> = Vec::new();
        // Not `tarjan_scc`: petgraph's Tarjan recurses once per item on a path, and a long
        // chain closed by one injected edge overflowed the stack.
        for scc in petgraph::algo::kosaraju_scc(&pg) {
            let mut scc: Vec<usize> = scc.into_iter().map(|n| n.index()).collect();
            scc.sort_unstable();
            let id = members.len();
            for &m in &scc {
                component[m] = id;
            }
            members.push(scc);
        }
        self.cycles = members.iter().filter(|m| m.len() > 1).cloned().collect();
        self.cycles.sort_by_key(|m| m[0]);

        // Kahn's algorithm over the condensation; ties go to the component whose first item
        // comes first in the input, so an in-order trace renders in input order.
        let mut indegree = vec![0usize; members.len()];
        for parent in 0..len {
            for child in self.children.iter(parent).filter(|&c| c < len) {
                if component[parent] != component[child] {
                    indegree[component[child]] += 1;
                }
            }
        }
        let mut ready: BinaryHeap<Reverse<(usize, usize)>> = members
            .iter()
            .enumerate()
            .filter(|(id, _)| indegree[*id] == 0)
            .map(|(id, m)| Reverse((m[0], id)))
            .collect();
        let mut order = Vec::with_capacity(len);
        while let Some(Reverse((_, id))) = ready.pop() {
            for &m in &members[id] {
                order.push(m);
                for child in self.children.iter(m).filter(|&c| c < len) {
                    let c = component[child];
                    if c != id {
                        indegree[c] -= 1;
                        if indegree[c] == 0 {
                            ready.push(Reverse((members[c][0], c)));
                        }
                    }
                }
            }
        }
        self.order = Some(order);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_graph_has_no_cycles_and_input_order() {
        let mut g = Graph::default();
        g.grow(3);
        g.add_edge(0, 1);
        g.add_edge(1, 2);
        g.refresh(3);
        assert!(g.cycles().is_empty());
        assert!(g.order().is_none());
    }

    #[test]
    fn back_edge_makes_a_cycle_and_order_stays_topological() {
        let mut g = Graph::default();
        g.grow(5);
        g.add_edge(0, 1);
        g.add_edge(1, 2);
        g.add_edge(2, 3);
        g.add_edge(3, 1); // cycle 1-2-3
        g.add_edge(0, 4);
        g.refresh(5);
        assert_eq!(g.cycles(), &[vec![1, 2, 3]]);
        assert_eq!(g.order(), Some(&[0, 1, 2, 3, 4][..]));
    }

    #[test]
    fn forward_reference_renders_parent_first() {
        let mut g = Graph::default();
        g.grow(2);
        g.add_edge(1, 0); // item 0's parent is item 1
        g.refresh(2);
        assert!(g.cycles().is_empty());
        assert_eq!(g.order(), Some(&[1, 0][..]));
    }

    #[test]
    fn a_refresh_over_a_prefix_leaves_later_items_for_later() {
        // Items 0..4 linked at once (a batch), with a back edge 3 → 1, refreshed item by item.
        let mut g = Graph::default();
        g.grow(4);
        g.add_edge(0, 1);
        g.add_edge(1, 2);
        g.add_edge(2, 3);
        g.add_edge(3, 1);
        for len in 1..=3 {
            g.refresh(len);
            assert!(
                g.cycles().is_empty(),
                "no cycle within the first {len} items"
            );
            assert_eq!(g.order(), Some(&(0..len).collect::<Vec<_>>()[..]));
        }
        g.refresh(4);
        assert_eq!(g.cycles(), &[vec![1, 2, 3]]);
        assert_eq!(g.order(), Some(&[0, 1, 2, 3][..]));
    }

    #[test]
    fn self_loop_is_refused() {
        let mut g = Graph::default();
        g.grow(1);
        assert!(!g.add_edge(0, 0));
    }
}
