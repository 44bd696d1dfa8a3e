//! Output formats for topologies: the nvidia-smi topo -m matrix, tables, and SVG/DOT drawings that render without Graphviz.
