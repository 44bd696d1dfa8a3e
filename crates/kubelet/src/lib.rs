//! Safe editing of KubeletConfiguration files (JSON or YAML): show, set with validation, atomic write with backup, rollback.
