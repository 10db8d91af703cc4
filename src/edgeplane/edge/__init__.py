"""The data plane: the edge listener that receives client traffic and routes it."""
