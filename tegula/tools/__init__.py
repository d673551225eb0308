"""Host-side helpers (Triton's `triton.tools`): `tensor_descriptor.TensorDescriptor`."""
