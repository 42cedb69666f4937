"""The argument checks of the layers (private): an alias.

They live in `keras_affine_div._validation`, shared by the layers, the ops
and the model builders; this module keeps the older import path working.
"""

from keras_affine_div._validation import int_tuple
from keras_affine_div._validation import one_of
from keras_affine_div._validation import positive_float
from keras_affine_div._validation import positive_int

__all__ = ["int_tuple", "one_of", "positive_float", "positive_int"]
