# Two commands for a fresh clone (see README.md):
#   make smoke   set up .venv, then run the smoke study (the main job)
#   make test    set up .venv, then run the whole test suite on the three backends
# The set-up is reused while requirements-cpu.txt and pyproject.toml are
# unchanged. VENV, BACKEND and DATA_DIR can be overridden:
#   make smoke BACKEND=torch DATA_DIR=/path/to/cifar10-image-folder

VENV ?= .venv
PYTHON ?= python3
BACKEND ?= jax
# The CIFAR-10 image folder: DATA_DIR, else $KERAS_AFFINE_DIV_CIFAR10_DIR
# (read by the runner itself), else a local copy next to the clone, else
# the download (tfds, or keras.datasets without TensorFlow).
DATA_DIR ?= $(if $(KERAS_AFFINE_DIV_CIFAR10_DIR),,$(wildcard ../shared/datasets/cifar10-jpeg))
# The smoke run writes outside the committed results.
SMOKE_OUT ?= build/smoke

export TF_CPP_MIN_LOG_LEVEL ?= 2
export TF_ENABLE_ONEDNN_OPTS ?= 0

STAMP := $(VENV)/.installed

.PHONY: setup smoke test wheel-check

setup: $(STAMP)

# torch's CPU wheel, alone (its dependencies come with the rest), from
# the index requirements-cpu.txt names.
TORCH_PIN := $(shell grep -E '^torch==' requirements-cpu.txt)
TORCH_INDEX := $(shell sed -n 's/^\# torch index: //p' requirements-cpu.txt)
# KerasHub without its dependencies (requirements-cpu.txt says why).
KERAS_HUB_PIN := keras-hub==0.32.0

# --no-compile: Python compiles what it imports when it first does, and
# caches it (pip's compiling every file of TensorFlow, JAX and PyTorch took
# about half of the set-up's time here). The cache is what makes that
# cheap: where the environment forbids it (PYTHONDONTWRITEBYTECODE), every
# process of the suite would recompile Keras and a backend from source,
# so the commands here allow it.
unexport PYTHONDONTWRITEBYTECODE
PIP_INSTALL := $(VENV)/bin/python -m pip install -q --disable-pip-version-check --no-compile

$(STAMP): requirements-cpu.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --no-deps --extra-index-url $(TORCH_INDEX) "$(TORCH_PIN)"
	$(PIP_INSTALL) -r requirements-cpu.txt
	$(PIP_INSTALL) --no-deps "$(KERAS_HUB_PIN)"
	$(PIP_INSTALL) -e ".[tuning,notebooks,test]"
	touch $(STAMP)

smoke: $(STAMP)
	KERAS_BACKEND=$(BACKEND) $(VENV)/bin/python -m tuning.sweep smoke \
	  $(if $(DATA_DIR),--data-dir $(DATA_DIR)) \
	  --results-dir $(SMOKE_OUT)/results --runs-dir $(SMOKE_OUT)/runs

test: $(STAMP)
	PYTHON=$(VENV)/bin/python scripts/test_all_backends.sh

wheel-check:
	PYTHON=$(PYTHON) scripts/wheel_check.sh
