//! The NIC assignment for fixed GPU and NIC counts per class is a transportation
//! problem; this is a small min-cost flow (successive shortest paths with Bellman-Ford,
//! exact on integer costs) with reusable buffers.

/// One residual edge.
#[derive(Debug, Clone, Copy)]
struct Edge {
    to: usize,
    cap: i64,
    cost: i64,
}

/// A reusable min-cost-flow solver.
#[derive(Debug, Clone, Default)]
pub(crate) struct MinCostFlow {
    edges: Vec<Edge>,
    adj: Vec<Vec<usize>>,
    dist: Vec<i64>,
    prev: Vec<usize>,
    in_queue: Vec<bool>,
    queue: std::collections::VecDeque<usize>,
}

/// Sentinel for "no edge".
const NONE: usize = usize::MAX;

impl MinCostFlow {
    /// Clears the graph and sizes it for `nodes` nodes.
    pub(crate) fn reset(&mut self, nodes: usize) {
        self.edges.clear();
        for a in &mut self.adj {
            a.clear();
        }
        self.adj.resize_with(nodes.max(self.adj.len()), Vec::new);
        self.adj.truncate(nodes);
    }

    /// Adds an edge and returns its index (the reverse edge is `index ^ 1`).
    pub(crate) fn edge(&mut self, from: usize, to: usize, cap: i64, cost: i64) -> usize {
        let i = self.edges.len();
        self.edges.push(Edge { to, cap, cost });
        self.edges.push(Edge {
            to: from,
            cap: 0,
            cost: -cost,
        });
        self.adj[from].push(i);
        self.adj[to].push(i + 1);
        i
    }

    /// Flow on edge `i` (the reverse edge's residual capacity).
    pub(crate) fn flow(&self, i: usize) -> i64 {
        self.edges[i ^ 1].cap
    }

    /// Sends up to `want` units from `s` to `t` at minimum cost; returns (flow, cost).
    pub(crate) fn run(&mut self, s: usize, t: usize, want: i64) -> (i64, i64) {
        let n = self.adj.len();
        let (mut flow, mut cost) = (0i64, 0i64);
        while flow < want {
            self.dist.clear();
            self.dist.resize(n, i64::MAX);
            self.prev.clear();
            self.prev.resize(n, NONE);
            self.in_queue.clear();
            self.in_queue.resize(n, false);
            self.dist[s] = 0;
            self.queue.clear();
            self.queue.push_back(s);
            while let Some(u) = self.queue.pop_front() {
                self.in_queue[u] = false;
                let du = self.dist[u];
                for &ei in &self.adj[u] {
                    let e = self.edges[ei];
                    if e.cap > 0 && du + e.cost < self.dist[e.to] {
                        self.dist[e.to] = du + e.cost;
                        self.prev[e.to] = ei;
                        if !self.in_queue[e.to] {
                            self.in_queue[e.to] = true;
                            self.queue.push_back(e.to);
                        }
                    }
                }
            }
            if self.dist[t] == i64::MAX {
                break;
            }
            let mut push = want - flow;
            let mut v = t;
            while v != s {
                let ei = self.prev[v];
                push = push.min(self.edges[ei].cap);
                v = self.edges[ei ^ 1].to;
            }
            let mut v = t;
            while v != s {
                let ei = self.prev[v];
                self.edges[ei].cap -= push;
                self.edges[ei ^ 1].cap += push;
                v = self.edges[ei ^ 1].to;
            }
            flow += push;
            cost += push * self.dist[t];
        }
        (flow, cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_cheaper_of_two_routes_and_respects_capacity() {
        let mut f = MinCostFlow::default();
        f.reset(4);
        let a = f.edge(0, 1, 2, 1);
        let b = f.edge(0, 2, 2, 5);
        f.edge(1, 3, 1, 0);
        f.edge(2, 3, 5, 0);
        let (flow, cost) = f.run(0, 3, 3);
        assert_eq!((flow, cost), (3, 1 + 5 + 5));
        assert_eq!((f.flow(a), f.flow(b)), (1, 2));
        // Reuse after reset.
        f.reset(2);
        f.edge(0, 1, 1, -7);
        assert_eq!(f.run(0, 1, 5), (1, -7));
    }
}
