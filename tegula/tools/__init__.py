"""Host-side helpers (Triton's `triton.tools`): `tensor_descriptor.TensorDescriptor` and
`mxfp` (microscaling FP4 / E8M0 tensors for block-scaled matmul inputs)."""
