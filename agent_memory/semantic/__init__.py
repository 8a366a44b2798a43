"""Semantic recall, the optional extra: ``status`` says whether it is on for a vault and
holds its vectors (importing it imports nothing optional), ``model_files`` finds the
model's weights without numpy, ``embed`` is the model's forward pass in numpy and
``vectors`` stores and searches one vector per memory beside the index.
"""
