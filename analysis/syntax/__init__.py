"""The syntax probe: which head best predicts each dependency relation of a Universal Dependencies treebank."""
