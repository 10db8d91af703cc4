"""The control plane: the API listener serving ``/client/v4``, health and metrics."""
