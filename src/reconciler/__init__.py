"""A controller-runtime style engine on asyncio. Knows nothing about GPUs."""
