//! The generated transformer training step.
