//! The formats peers read and write, so a team can put gauntlet's numbers beside the ones it already has:
//! llm-d's Benchmark Report v0.2 (written from a bench record) and vLLM's `bench serve --save-result` JSON (read).
//! What is read is untrusted: bounded, validated, every error naming the file.

pub mod llmd;
pub mod vllm;
