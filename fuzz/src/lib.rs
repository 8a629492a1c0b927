//! Fuzz target bodies for topicfs; see [`targets`].

pub mod targets;
