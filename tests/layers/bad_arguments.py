"""The constructor arguments each layer rejects, and the messages.

The table of `layer_contracts_test.test_bad_arguments_raise`: every error
path of a constructor pins its message (`pytest.raises(..., match=...)`).
"""

from keras_affine_div import layers

# Per class: case name -> (arguments, error, the message it must match).
BAD_ARGUMENTS = {
    layers.AffineLikeDense: {
        "zero_units": (
            {"units": 0},
            ValueError,
            r"Expected a positive integer.*units=0",
        ),
        "negative_units": ({"units": -3}, ValueError, r"units=-3"),
        "float_units": (
            {"units": 2.5},
            TypeError,
            r"positive integer.*units=2.5",
        ),
        "string_units": ({"units": "8"}, TypeError, r"units='8'"),
        "bool_units": ({"units": True}, TypeError, r"units=True"),
        "string_use_bias": (
            {"units": 4, "use_bias": "yes"},
            TypeError,
            r"use_bias='yes'",
        ),
        "unknown_activation": (
            {"units": 4, "activation": "nope"},
            ValueError,
            r"nope",
        ),
    },
    layers.NormLikeDense: {
        "zero_units": ({"units": 0}, ValueError, r"positive integer.*units=0"),
        "float_units": ({"units": 1.5}, TypeError, r"units=1.5"),
        "none_units": ({"units": None}, TypeError, r"units=None"),
        "zero_epsilon": (
            {"units": 4, "epsilon": 0.0},
            ValueError,
            r"> 0.*epsilon=0.0",
        ),
        "negative_epsilon": (
            {"units": 4, "epsilon": -1e-3},
            ValueError,
            r"epsilon=-0.001",
        ),
        "nan_epsilon": (
            {"units": 4, "epsilon": float("nan")},
            ValueError,
            r"epsilon=nan",
        ),
        "string_epsilon": (
            {"units": 4, "epsilon": "small"},
            TypeError,
            r"epsilon='small'",
        ),
        "underflowing_epsilon": (
            {"units": 4, "epsilon": 1e-50},
            ValueError,
            r"Expected a finite float >= 5\.1698788e-26 \(2\*\*-84\): below "
            r"it the gradient at x = 0 overflows float32.*Received: "
            r"epsilon=1e-50",
        ),
        "nan_gradient_epsilon": (
            {"units": 4, "epsilon": 2e-26},
            ValueError,
            r">= 5\.1698788e-26 \(2\*\*-84\).*Received: epsilon=2e-26$",
        ),
    },
    layers.AffineLikeEinsumDense: {
        "non_string_equation": (
            {"equation": 3, "output_shape": 4},
            TypeError,
            r"Expected an einsum string.*Received: equation=3 of type int$",
        ),
        "no_arrow": (
            {"equation": "abc,cd", "output_shape": 4},
            ValueError,
            r"Expected an einsum string of the form 'X,Y->Z', "
            r"'\.\.\.X,Y->\.\.\.Z' or 'X\.\.\.,Y->Z\.\.\.'.*"
            r"Received: equation='abc,cd'$",
        ),
        "ellipsis_on_one_side": (
            {"equation": "...c,cd->abd", "output_shape": (None, 4)},
            ValueError,
            r"same end of the input and the output.*equation='\.\.\.c,cd->abd'",
        ),
        "ellipsis_in_kernel": (
            {"equation": "abc,...cd->abd", "output_shape": (None, 4)},
            ValueError,
            r"Received: equation='abc,\.\.\.cd->abd'$",
        ),
        "repeated_letter": (
            {"equation": "abb,bd->abd", "output_shape": (None, 4)},
            ValueError,
            r"each letter at most once in the input spec 'abb'",
        ),
        "unexplained_output_letter": (
            {"equation": "abc,cd->abe", "output_shape": (None, 4)},
            ValueError,
            r"every output letter in the input or the kernel spec; 'e'",
        ),
        "unexplained_kernel_letter": (
            {"equation": "abc,ce->ab", "output_shape": (None,)},
            ValueError,
            r"every kernel letter in the input or the output spec; 'e'.*"
            r"Received: equation='abc,ce->ab'$",
        ),
        "sum_without_kernel": (
            {"equation": "abc,d->abd", "output_shape": (None, 4)},
            ValueError,
            r"every contracted input letter.*'c' would be summed without "
            r"the kernel",
        ),
        "batch_not_first": (
            {"equation": "abc,ad->cbd", "output_shape": (None, 4)},
            ValueError,
            r"the batch axis first in the input and the output spec",
        ),
        "output_shape_too_long": (
            {"equation": "abc,cd->abd", "output_shape": (3, 5, 4)},
            ValueError,
            r"Expected 2 entries, one per output axis 'bd' of the equation.*"
            r"Received: output_shape=\(3, 5, 4\)$",
        ),
        "output_shape_left_ellipsis": (
            {"equation": "...c,cd->...d", "output_shape": (None, 4)},
            ValueError,
            r"Expected 1 entries, one per output axis 'd'.*"
            r"output_shape=\(None, 4\)$",
        ),
        "zero_output_size": (
            {"equation": "abc,cd->abd", "output_shape": (None, 0)},
            ValueError,
            r"positive integers or None.*output_shape=\(None, 0\)$",
        ),
        "string_output_shape": (
            {"equation": "abc,cd->abd", "output_shape": "4"},
            TypeError,
            r"output_shape='4' of type str$",
        ),
        "bias_axis_not_in_output": (
            {
                "equation": "abc,cd->abd",
                "output_shape": (None, 4),
                "bias_axes": "c",
            },
            ValueError,
            r"distinct letters of the output spec 'abd'\. Received: "
            r"bias_axes='c', equation='abc,cd->abd'$",
        ),
        "empty_bias_axes": (
            {
                "equation": "abc,cd->abd",
                "output_shape": (None, 4),
                "bias_axes": "",
            },
            ValueError,
            r"bias_axes=''",
        ),
        "list_bias_axes": (
            {
                "equation": "abc,cd->abd",
                "output_shape": (None, 4),
                "bias_axes": ["d"],
            },
            TypeError,
            r"bias_axes=\['d'\] of type list$",
        ),
        "unknown_activation": (
            {
                "equation": "abc,cd->abd",
                "output_shape": (None, 4),
                "activation": "nope",
            },
            ValueError,
            r"nope",
        ),
    },
    layers.NormLikeEinsumDense: {
        "zero_epsilon": (
            {
                "equation": "abc,cd->abd",
                "output_shape": (None, 4),
                "epsilon": 0.0,
            },
            ValueError,
            r"> 0.*epsilon=0.0",
        ),
        "nan_gradient_epsilon": (
            {
                "equation": "abc,cd->abd",
                "output_shape": (None, 4),
                "epsilon": 2e-26,
            },
            ValueError,
            r">= 5\.1698788e-26 \(2\*\*-84\).*Received: epsilon=2e-26$",
        ),
        "string_epsilon": (
            {
                "equation": "abc,cd->abd",
                "output_shape": (None, 4),
                "epsilon": "small",
            },
            TypeError,
            r"epsilon='small'",
        ),
        "bad_equation": (
            {"equation": "abc->abd", "output_shape": (None, 4)},
            ValueError,
            r"Received: equation='abc->abd'$",
        ),
        "none_output_shape": (
            {"equation": "abc,cd->abd", "output_shape": None},
            TypeError,
            r"output_shape=None of type NoneType$",
        ),
    },
    layers.PatchNormConv1D: {
        "zero_filters": (
            {"filters": 0, "kernel_size": 3},
            ValueError,
            r"filters=0",
        ),
        "kernel_rank2": (
            {"filters": 4, "kernel_size": (3, 3)},
            ValueError,
            r"tuple of 1.*kernel_size=\(3, 3\)",
        ),
        "zero_epsilon": (
            {"filters": 4, "kernel_size": 3, "epsilon": 0},
            ValueError,
            r"epsilon=0",
        ),
        "underflowing_epsilon": (
            {"filters": 4, "kernel_size": 3, "epsilon": 1e-50},
            ValueError,
            r">= 5\.1698788e-26 \(2\*\*-84\).*epsilon=1e-50",
        ),
        "nan_gradient_epsilon": (
            {"filters": 4, "kernel_size": 3, "epsilon": 2e-26},
            ValueError,
            r">= 5\.1698788e-26 \(2\*\*-84\).*Received: epsilon=2e-26$",
        ),
        "unknown_padding": (
            {"filters": 4, "kernel_size": 3, "padding": "full"},
            ValueError,
            r"Expected one of 'valid', 'same', 'causal'. Received: padding='full'",
        ),
        "strides_and_dilation": (
            {"filters": 4, "kernel_size": 3, "strides": 2, "dilation_rate": 2},
            ValueError,
            r"strides=\(2,\), dilation_rate=\(2,\)",
        ),
        "filters_not_divisible_by_groups": (
            {"filters": 4, "kernel_size": 3, "groups": 3},
            ValueError,
            r"divisible.*filters=4, groups=3",
        ),
    },
    layers.PatchNormConv2D: {
        "negative_filters": (
            {"filters": -1, "kernel_size": 3},
            ValueError,
            r"filters=-1",
        ),
        "string_filters": (
            {"filters": "4", "kernel_size": 3},
            TypeError,
            r"filters='4'",
        ),
        "zero_epsilon": (
            {"filters": 4, "kernel_size": 3, "epsilon": 0},
            ValueError,
            r"epsilon=0",
        ),
        "underflowing_epsilon": (
            {"filters": 4, "kernel_size": 3, "epsilon": 1e-50},
            ValueError,
            r">= 5\.1698788e-26 \(2\*\*-84\).*epsilon=1e-50",
        ),
        "nan_gradient_epsilon": (
            {"filters": 4, "kernel_size": 3, "epsilon": 2e-26},
            ValueError,
            r">= 5\.1698788e-26 \(2\*\*-84\).*Received: epsilon=2e-26$",
        ),
        "infinite_epsilon": (
            {"filters": 4, "kernel_size": 3, "epsilon": float("inf")},
            ValueError,
            r"epsilon=inf",
        ),
        "none_epsilon": (
            {"filters": 4, "kernel_size": 3, "epsilon": None},
            TypeError,
            r"epsilon=None",
        ),
        "strides_and_dilation": (
            {
                "filters": 4,
                "kernel_size": 3,
                "strides": (1, 2),
                "dilation_rate": (2, 1),
            },
            ValueError,
            r"strides > 1.*dilation_rate > 1",
        ),
        "unknown_padding": (
            {"filters": 4, "kernel_size": 3, "padding": "full"},
            ValueError,
            r"padding='full'",
        ),
        "bad_data_format": (
            {"filters": 4, "kernel_size": 3, "data_format": 1},
            ValueError,
            r"data_format=1",
        ),
        "negative_strides": (
            {"filters": 4, "kernel_size": 3, "strides": -2},
            ValueError,
            r"strides=-2",
        ),
    },
    layers.PatchNormConv3D: {
        "kernel_rank2": (
            {"filters": 4, "kernel_size": (2, 2)},
            ValueError,
            r"tuple of 3.*kernel_size=\(2, 2\)",
        ),
        "causal_padding": (
            {"filters": 4, "kernel_size": 2, "padding": "causal"},
            ValueError,
            r"Expected one of 'valid', 'same'. Received: padding='causal'",
        ),
        "negative_epsilon": (
            {"filters": 4, "kernel_size": 2, "epsilon": -1.0},
            ValueError,
            r"epsilon=-1.0",
        ),
        "subnormal_epsilon": (
            {"filters": 4, "kernel_size": 2, "epsilon": 1e-40},
            ValueError,
            r">= 5\.1698788e-26 \(2\*\*-84\).*epsilon=1e-40",
        ),
        "nan_gradient_epsilon": (
            {"filters": 4, "kernel_size": 2, "epsilon": 2e-26},
            ValueError,
            r">= 5\.1698788e-26 \(2\*\*-84\).*Received: epsilon=2e-26$",
        ),
    },
    layers.AffineLikeConv1D: {
        "float_filters": (
            {"filters": 2.0, "kernel_size": 3},
            TypeError,
            r"filters=2.0",
        ),
        "zero_kernel": (
            {"filters": 4, "kernel_size": 0},
            ValueError,
            r"positive.*kernel_size=0",
        ),
        "string_kernel": (
            {"filters": 4, "kernel_size": "3"},
            TypeError,
            r"kernel_size='3'",
        ),
        "unknown_data_format": (
            {"filters": 4, "kernel_size": 3, "data_format": "NWC"},
            ValueError,
            r"data_format='NWC'",
        ),
        "zero_groups": (
            {"filters": 4, "kernel_size": 3, "groups": 0},
            ValueError,
            r"groups=0",
        ),
    },
    layers.AffineLikeConv2D: {
        "zero_filters": (
            {"filters": 0, "kernel_size": 3},
            ValueError,
            r"filters=0",
        ),
        "float_filters": (
            {"filters": 2.0, "kernel_size": 3},
            TypeError,
            r"filters=2.0",
        ),
        "zero_kernel": (
            {"filters": 4, "kernel_size": 0},
            ValueError,
            r"positive.*kernel_size=0",
        ),
        "negative_kernel": (
            {"filters": 4, "kernel_size": (3, -1)},
            ValueError,
            r"kernel_size=\(3, -1\)",
        ),
        "kernel_rank3": (
            {"filters": 4, "kernel_size": (3, 3, 3)},
            ValueError,
            r"tuple of 2.*kernel_size=\(3, 3, 3\)",
        ),
        "string_kernel": (
            {"filters": 4, "kernel_size": "3"},
            TypeError,
            r"kernel_size='3'",
        ),
        "zero_strides": (
            {"filters": 4, "kernel_size": 3, "strides": 0},
            ValueError,
            r"strides=0",
        ),
        "zero_dilation": (
            {"filters": 4, "kernel_size": 3, "dilation_rate": (1, 0)},
            ValueError,
            r"dilation_rate=\(1, 0\)",
        ),
        "strides_and_dilation": (
            {"filters": 4, "kernel_size": 3, "strides": 2, "dilation_rate": 2},
            ValueError,
            r"strides=\(2, 2\), dilation_rate=\(2, 2\)",
        ),
        "causal_padding": (
            {"filters": 4, "kernel_size": 3, "padding": "causal"},
            ValueError,
            r"Expected one of 'valid', 'same'. Received: padding='causal'",
        ),
        "unknown_data_format": (
            {"filters": 4, "kernel_size": 3, "data_format": "NHWC"},
            ValueError,
            r"data_format='NHWC'",
        ),
        "zero_groups": (
            {"filters": 4, "kernel_size": 3, "groups": 0},
            ValueError,
            r"groups=0",
        ),
        "filters_not_divisible_by_groups": (
            {"filters": 4, "kernel_size": 3, "groups": 3},
            ValueError,
            r"divisible.*filters=4, groups=3",
        ),
    },
    layers.AffineLikeConv3D: {
        "kernel_rank4": (
            {"filters": 4, "kernel_size": (2, 2, 2, 2)},
            ValueError,
            r"tuple of 3.*kernel_size=\(2, 2, 2, 2\)",
        ),
        "strides_and_dilation": (
            {
                "filters": 4,
                "kernel_size": 2,
                "strides": (1, 2, 1),
                "dilation_rate": 2,
            },
            ValueError,
            r"strides > 1.*dilation_rate > 1",
        ),
        "filters_not_divisible_by_groups": (
            {"filters": 4, "kernel_size": 2, "groups": 3},
            ValueError,
            r"divisible.*filters=4, groups=3",
        ),
    },
}
