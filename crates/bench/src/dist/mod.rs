//! The bench beyond one machine: agents on load hosts ([`agent`]) and the controller that
//! splits a run over them and merges their results exactly ([`controller`]).

pub mod agent;
pub mod controller;
