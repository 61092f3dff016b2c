//! What a run writes: each workload's table, the verdict per workload, `report.md` (or a
//! document's marked section) with the charts, and `index.html`.

pub mod table;
pub mod verdict;
pub mod render;
pub mod page;
