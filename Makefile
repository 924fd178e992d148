# Attention: from Bahdanau to Transformers. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(abspath $(VENV))/bin
# nbgrader's gradebook shells out to `alembic`, and notebooks run on the venv's kernel.
export PATH := $(BIN):$(PATH)
# Bytecode is cached under the venv, never beside the sources (no __pycache__ of the solutions in
# the tree), so that each of the grader's processes does not compile the course's modules again.
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(abspath $(VENV))/pycache

BOOK_FLAGS := -W -n --keep-going
# Chapters that `make book` executes at a time (each on one thread); 1: one after another
BOOK_JOBS ?= 2
ASSIGNMENT ?=
JOBS ?= 2
NOTEBOOK ?=
PYTEST_ARGS ?=
# `make book BOOK_OUT=_build/term` builds into _build/term/_build/html (executed notebooks are shared)
BOOK_OUT ?= .
SITE ?= _build/html
# The port that `make serve` serves the book on (127.0.0.1 only)
PORT ?= 8000
DEST ?=
# The files and names that targets take reach their commands through the environment ("$$NOTEBOOK"), never
# pasted into the shell's line: a name as a browser, Colab or a person gives it (spaces, parentheses, quotes:
# `Copy of x (1).ipynb`) passes as it is.
export NOTEBOOK ASSIGNMENT DEST SITE BOOK_OUT NANOGPT

.PHONY: help venv lab lock lint test-fast sandbox browser book serve linkcheck check-site student-repo test test-exhaustive exercises check-exercises grade cluster-certs grade-scheduler grade-worker grades class-report class-report-example term-report formgrader check validate similarity bench-suite bench-book figures bench-grading bench-grading-cluster bench-attacks grading-accuracy train generate bench-transformer bench-generate bench-pretrained test-device bench-gpu bench-compile clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

venv: $(VENV)/.installed $(VENV)/.bytecode  ## create or update .venv from requirements.txt

# uv (its pinned version, installed by pip) installs the pins of requirements.txt: the same versions as pip,
# three to four times faster on the course's machines (2 min against 30 to 40 s). It takes local wheels where
# pip is told of them (PIP_FIND_LINKS or pip's find-links setting: the CPU build of torch on these machines).
# The bytecode is compiled where every interpreter looks (__pycache__ beside each module), not under this
# Makefile's PYTHONPYCACHEPREFIX: the grading sandbox and plain nbgrader see no prefix, and without that
# bytecode every sandbox compiled torch, NumPy and IPython again as it started (seconds each).
FIND_LINKS = $${UV_FIND_LINKS:-$${PIP_FIND_LINKS:-$$($(BIN)/python -m pip config get global.find-links 2>/dev/null)}}
# constraints.txt (`make lock`) pins every package that requirements.txt's pins pull in, so that each venv holds
# the versions that were tested.
# uv's TMPDIR is the venv's (uv leaves the lock of its build of the course's package there): nothing in the user's.
$(VENV)/.installed: requirements.txt constraints.txt pyproject.toml
	@test -x $(BIN)/python || { $(PYTHON) -m venv $(VENV) && touch $(VENV)/.new; }
	env -u PYTHONPYCACHEPREFIX $(BIN)/python -m pip install --quiet --disable-pip-version-check "$$(grep -E '^uv==' requirements.txt)"
	@mkdir -p $(VENV)/tmp
	env -u PYTHONPYCACHEPREFIX UV_FIND_LINKS="$(FIND_LINKS)" TMPDIR="$(abspath $(VENV))/tmp" $(BIN)/uv pip install \
	  --quiet --python $(BIN)/python --compile-bytecode -r requirements.txt -c constraints.txt
	@touch $@

# Resolved afresh in a venv of its own from requirements.txt alone: the newest versions its pins allow, then
# recorded. torch's local label (+cpu) is dropped: the same pin takes the CUDA build elsewhere, whose own
# dependencies (nvidia-*, triton) torch pins exactly.
LOCK_VENV := _build/lock-venv
LOCK_BIN := $(abspath $(LOCK_VENV))/bin
lock:  ## pin every dependency, transitive ones too, into constraints.txt and constraints-colab.txt (needs the package index)
	rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV)
	env -u PYTHONPYCACHEPREFIX $(LOCK_BIN)/python -m pip install --quiet --disable-pip-version-check "$$(grep -E '^uv==' requirements.txt)"
	env -u PYTHONPYCACHEPREFIX UV_FIND_LINKS="$${UV_FIND_LINKS:-$${PIP_FIND_LINKS:-$$($(LOCK_BIN)/python -m pip config get global.find-links 2>/dev/null)}}" \
	  $(LOCK_BIN)/uv pip install --quiet --python $(LOCK_BIN)/python -r requirements.txt
	{ echo "# Every package that requirements.txt's pins install, at the version tested. Written by \`make lock\`;"; \
	  echo "# make venv and the students' repository install with it (-c constraints.txt), Colab with"; \
	  echo "# constraints-colab.txt (the same without Colab's own runtime: autograder.release.colab_pins)."; \
	  $(LOCK_BIN)/uv pip freeze --python $(LOCK_BIN)/python --exclude-editable | sed -E 's/\+[A-Za-z0-9.]+$$//'; \
	} > constraints.txt
	$(LOCK_BIN)/python -m autograder.release.colab_pins
	rm -rf $(LOCK_VENV)

# The same bytecode for a venv that an earlier Makefile installed under the prefix (a no-op otherwise). Skipped
# for a venv that .installed created (.new): uv, installing every package into it, compiled the whole of its
# site-packages (it compiles every module there, not only those it installed), and walking 17,000 files again
# for nothing took 9 s of a fresh clone's `make test`.
$(VENV)/.bytecode: $(VENV)/.installed
	@test -e $(VENV)/.new || env -u PYTHONPYCACHEPREFIX $(BIN)/python -m compileall -q -j 0 \
	  "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null || true
	@rm -f $(VENV)/.new
	@touch $@

sandbox:  ## install bubblewrap, the sandbox that students' code is graded in
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing bubblewrap"; apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; \
	  else echo "Grading needs bubblewrap: install it (e.g. sudo apt-get install bubblewrap)"; exit 1; fi; }

browser:  ## install Chromium, the browser that `make test` reads the built site with
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || [ -n "$$CHROMIUM" ] || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing chromium"; apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	  else echo "The site tests need Chromium: install it (e.g. sudo apt-get install chromium) or set CHROMIUM=/path/to/chrome"; exit 1; fi; }

# JupyterLab serves the course's folder, where nbgrader_config.py is, and opens NOTEBOOK in it: nbgrader's course
# folder (the one Jupyter starts in) must lie inside the server's root, and `jupyter lab path/to/x.ipynb` alone makes
# the notebook's own folder the root (nbgrader then logs that it "will not work correctly"). JupyterLab refuses
# to start as root unless told to: make tells it so where you are root (in a container, say).
# It is a student's lab: the Jupyter configuration folder autograder/nbgrader/student_lab goes first on
# JUPYTER_CONFIG_PATH for this server only (no configuration of yours or of .venv is written) and turns off
# nbgrader's instructor tools (the Create Assignment sidebar, the Formgrader and Course List menus and their
# server extensions; the Assignment List and Validate stay) and JupyterLab's question about fetching news.
# An instructor's lab, with every nbgrader tool, is `make formgrader`.
ALLOW_ROOT = $(if $(filter 0,$(shell id -u)),--allow-root)
LAB_ARGS ?=
STUDENT_LAB := $(CURDIR)/autograder/nbgrader/student_lab
lab: venv  ## open a student's JupyterLab on the course (no instructor tools; make formgrader has them), NOTEBOOK=path opened in it (LAB_ARGS="--no-browser --port 8890" passes options)
	JUPYTER_CONFIG_PATH="$(STUDENT_LAB)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(BIN)/jupyter lab --ServerApp.root_dir="$$(pwd)" $(ALLOW_ROOT) $(LAB_ARGS) $${NOTEBOOK:+"$$NOTEBOOK"}

MATHJAX := book/_static/mathjax/VERSION

$(MATHJAX): course_site/mathjax.py | $(VENV)/.installed
	$(BIN)/python -m course_site.mathjax

book: venv $(MATHJAX)  ## build the book into _build/html, open or term edition (EDITION, RELEASED; term.yml); BOOK_JOBS=N chapters executed at a time (default 2; 1: one after another)
	@$(BIN)/python -c "from autograder.release import course; raise SystemExit(course.main())"
	@echo "Running each chapter's code, $(BOOK_JOBS) at a time, except where _build/.jupyter_cache holds the outputs of the same code"
	@# One line as each chapter starts and finishes (minutes for a training chapter), or is found in the cache,
	@# and every 30 s while it runs, the cell it is at and the last line that cell has shown, a training loop's
	@# step or epoch (--progress SECONDS);
	@# a chapter that fails stops make here, with its name and error.
	@PYTHONUNBUFFERED=1 $(BIN)/python -m course_site.execute --jobs $(BOOK_JOBS) .
	@# The build finds every chapter's outputs in the cache (one line each, from myst-nb's log), and would
	@# execute, one after another, a page whose outputs are not there. MyST's two configuration dumps (a
	@# line of thousands of characters each) are left out (course_site/build_log.py).
	@set -o pipefail; PYTHONUNBUFFERED=1 $(BIN)/jupyter-book build $(BOOK_FLAGS) --path-output "$$BOOK_OUT" . 2>&1 \
	  | $(BIN)/python -m course_site.build_log
	@# Opened from its folder the site reads whole, its search included (course_site/reading.py); served, as published.
	@site="$$(cd "$$BOOK_OUT" && pwd)/_build/html"; echo "The book is at file://$$site/index.html"; \
	  echo "or serve it: make serve$$([ "$$BOOK_OUT" = . ] || printf ' SITE=%q' "$$BOOK_OUT/_build/html"), then open http://127.0.0.1:$(PORT)/"

serve: venv  ## serve the built book (SITE) on http://127.0.0.1:PORT/ (PORT=8000), as the published site serves it; Ctrl+C stops
	$(BIN)/python -m course_site.serve "$$SITE" --port "$(PORT)"

linkcheck: venv $(MATHJAX)  ## check the book's external links (needs a network; `make test` checks the internal ones)
	@status=0; $(BIN)/jupyter-book build --builder linkcheck . || status=$$?; \
	mkdir -p _build/linkcheck && mv -f _build/html/output.txt _build/html/output.json _build/linkcheck/ 2>/dev/null; \
	echo "Report: _build/linkcheck/output.txt"; exit $$status

check-site: venv  ## fail if the built site (SITE) has a broken link, a hidden test, a marker, an unreleased solution or a machine's path
	$(BIN)/python -m course_site.links "$$SITE"
	$(BIN)/python -m course_site.leaks "$$SITE"
	$(BIN)/python -m course_site.paths "$$SITE"

student-repo: venv  ## write the students' repository (exercises, packages, released solutions only) into DEST, for term.yml's students_repository
	@test -n "$$DEST" || { echo "usage: make student-repo DEST=../attention-course-student [RELEASED=\"ch01_bahdanau ...\"] [STUDENTS_RELEASE=week-2]   (a new or empty folder outside this repository, or the checkout of an earlier export)"; exit 2; }
	$(BIN)/python -m course_site.export "$$DEST"

# ruff's and import-linter's caches under the venv, as the bytecode is: nothing written into the checkout
# (`make test` lints).
lint: export RUFF_CACHE_DIR := $(abspath $(VENV))/ruff-cache
lint: venv  ## ruff (code and notebooks: lint and format) and import-linter (the packages import one way)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --cache-dir "$(abspath $(VENV))/import-linter-cache"

# Two workers; each runs a test's group whole (its file, or its file and assignment), longest first (tests/conftest.py).
# One thread of torch each (and in what they start): two workers keep both cores busy, and a second thread
# only waits for the other worker's (a fifth of make test-fast's CPU time went to that).
# --durations: every run's log names its slowest tests (and their set-up: a built book, a class graded once).
PYTEST := OMP_NUM_THREADS=1 $(BIN)/python -m pytest -p no:cacheprovider -n 2 --dist loadscope --no-loadscope-reorder \
  --durations=40

# The test targets run pytest in a folder of their own, made in TMPDIR and removed when pytest ends, passed or
# failed (pytest's exit status kept): the tests' temporary folders (--basetemp: gigabytes of built books and
# graded classes), everything the programs they start put in TMPDIR, and torch's and Triton's compile caches.
# Nothing is left in TMPDIR, and nothing but the venv's bytecode anywhere. The folder and its tmp are 0711: the
# grading sandbox's unprivileged uid must pass through them to reach the folders staged for it in TMPDIR.
# TEST_KEEP=1 keeps the folder (the built book, the site's screenshots) and prints its path.
TEST_KEEP ?=
export TEST_KEEP
IN_TEST_FOLDER = run=$$(mktemp -d "$${TMPDIR:-/tmp}/attention-test-XXXXXX") && chmod 711 "$$run" \
  && mkdir -m 711 "$$run/tmp" && trap 'if [ -n "$$TEST_KEEP" ]; then echo "kept: $$run"; else rm -rf "$$run"; fi' EXIT \
  && TMPDIR="$$run/tmp" TORCHINDUCTOR_CACHE_DIR="$$run/torchinductor" TRITON_CACHE_DIR="$$run/triton" \
  $(PYTEST) --basetemp "$$run/pytest"

test-fast: venv  ## the unit tests: no book build, no browser, no class graded end to end (about a minute)
	@$(IN_TEST_FOLDER) -m "not slow and not browser" $(PYTEST_ARGS)

test: venv sandbox browser lint $(MATHJAX)  ## everything: lint, book build and site in Chromium, grading end to end, unit tests
	@$(IN_TEST_FOLDER) $(PYTEST_ARGS)

test-exhaustive: venv sandbox  ## what make test leaves out: every catalogue notebook graded whole, each in a sandbox of its own
	@$(IN_TEST_FOLDER) tests/test_catalogue.py --exhaustive $(PYTEST_ARGS)

exercises: venv  ## regenerate exercises/ from solutions/ (nbgrader generate_assignment)
	$(BIN)/python -m autograder.cli.exercises

check-exercises: venv  ## fail if exercises/ differs from what `make exercises` generates
	$(BIN)/python -m autograder.cli.exercises --check

grade: venv sandbox $(MATHJAX)  ## autograde (sandboxed, JOBS at a time; on CLUSTER=tls://host:port's workers) submitted/*/$(ASSIGNMENT), write feedback and grades/$(ASSIGNMENT).csv; ARGS="--help"
	@test -n "$$ASSIGNMENT" || { echo "usage: make grade ASSIGNMENT=ch02_scaled_dot_product"; exit 2; }
	$(BIN)/python -m autograder.cli.grade "$$ASSIGNMENT" --jobs $(JOBS) $${CLUSTER:+--cluster "$$CLUSTER" --certs "$$CERTS"} $(ARGS)

# Grading a class on several machines (autograder/cluster, the instructor guide's "A class on several machines"):
# the certificates once, then a scheduler, a worker on each grading host, and make grade CLUSTER=tls://host:port.
CERTS ?= grades/.cluster
export CLUSTER SCHEDULER CERTS PORT
cluster-certs: venv  ## make the cluster's TLS certificates in CERTS (grades/.cluster); copy it, without ca-key.pem, to each grading host
	$(BIN)/python -m autograder.cli.cluster --certs "$$CERTS" certs $(ARGS)

grade-scheduler: venv  ## run the scheduler that hands a class's notebooks to the grading hosts (PORT, default 8786)
	$(BIN)/python -m autograder.cli.cluster --certs "$$CERTS" scheduler --port "$${PORT:-8786}" $(ARGS)

grade-worker: venv sandbox  ## grade notebooks on this host for the scheduler at SCHEDULER=tls://host:port, JOBS at a time (root, the same commit)
	@test -n "$$SCHEDULER" || { echo "usage: make grade-worker SCHEDULER=tls://host:8786 JOBS=8"; exit 2; }
	OMP_NUM_THREADS=1 $(BIN)/python -m autograder.cli.cluster --certs "$$CERTS" worker "$$SCHEDULER" --jobs $(JOBS) $(ARGS)

# check and validate fail unless every test passed: make's "Error 1" is a failed test (for check, or a written
# answer left as released), "Error 2" a notebook that could not be checked (the commands' own exit status:
# autograder/cli/check.py, validate.py; validate warns of a written answer left as released, and passes).
grades: venv  ## after grading by hand in formgrader: the late penalties, feedback, grades/$(ASSIGNMENT).csv and grades/all.csv (nbgrader export) brought up to date from the gradebook
	$(BIN)/python -m autograder.cli.grade "$$ASSIGNMENT" --csv-only

class-report: venv  ## write again what the class got wrong in ASSIGNMENT (grades/ASSIGNMENT-report.html, -anonymous.html, .json, CSVs) from what make grade saved; make grade writes it itself
	@test -n "$$ASSIGNMENT" || { echo "usage: make class-report ASSIGNMENT=ch03_multi_head"; exit 2; }
	$(BIN)/python -m autograder.cli.class_report "$$ASSIGNMENT"

class-report-example: venv sandbox  ## grade the example class of the catalogue's right and wrong answers and write its report for the instructor guide (book/_examples/class-report/)
	$(BIN)/python -m tests.example_class --jobs $(JOBS)

term-report: venv  ## the term's report over every assignment graded (grades/term-report.html, -anonymous.html, .json)
	$(BIN)/python -m autograder.cli.class_report --term

# From the repository root, where nbgrader_config.py and gradebook.db are; --allow-root where it runs as root
# (a container), nbgrader's exchange folder made where it is missing (the course's exchange/ unless
# NBGRADER_EXCHANGE names another, nbgrader_config.py), the course's MathJax on its pages (autograder/nbgrader/formgrader.py).
export NBGRADER_EXCHANGE
formgrader: venv $(MATHJAX)  ## grade written answers by hand: JupyterLab with nbgrader's formgrader, each answer beside its rubric; ARGS="--no-browser --port 8890"; NBGRADER_EXCHANGE=DIR another exchange than the course's
	$(BIN)/python -m autograder.nbgrader.formgrader $(ARGS)

check: venv sandbox  ## check NOTEBOOK=path against the hidden tests, as grading would; fails unless all pass and every written answer is written; ASSIGNMENT=name where the notebook does not say
	@test -n "$$NOTEBOOK" || { echo "usage: make check NOTEBOOK=exercises/ch02_scaled_dot_product/ch02_scaled_dot_product.ipynb [ASSIGNMENT=ch02_scaled_dot_product]"; exit 2; }
	@$(BIN)/python -m autograder.cli.check "$$NOTEBOOK" $${ASSIGNMENT:+--assignment "$$ASSIGNMENT"}

validate: venv  ## run NOTEBOOK top to bottom and list its visible tests' verdicts (no solutions needed); fails unless all pass
	@test -n "$$NOTEBOOK" || { echo "usage: make validate NOTEBOOK=exercises/ch02_scaled_dot_product/ch02_scaled_dot_product.ipynb"; exit 2; }
	$(BIN)/python -m autograder.cli.validate "$$NOTEBOOK"

similarity: venv  ## report near-identical submissions of ASSIGNMENT, and copies of the open edition (grades/similarity/)
	@test -n "$$ASSIGNMENT" || { echo "usage: make similarity ASSIGNMENT=ch03_multi_head"; exit 2; }
	$(BIN)/python -m autograder.cli.similarity "$$ASSIGNMENT"

grading-accuracy: venv sandbox  ## correct answers at full marks, wrong ones caught in their item, per assignment
	$(BIN)/python -m tests.grading_accuracy $(ARGS)

bench-attacks: venv sandbox $(MATHJAX)  ## a class of 20 in each of chapters 2-7 with its attackers, graded by make grade's command: verdicts, the grader's peak memory and time vs an honest class; ARGS="--help"
	$(BIN)/python -m tests.attacked_class $(ARGS)

bench-suite: venv  ## time make test and make test-fast in a fresh clone of HEAD, as CI runs them; record the figures
	$(BIN)/python -m benchmarks.suite $(ARGS)

bench-book: venv $(MATHJAX)  ## time a cold book build (every chapter executed, cache left alone); record the figures
	$(BIN)/python -m benchmarks.book $(ARGS)

figures: venv  ## write the figures that README.md and the book quote from benchmarks/figures.json
	$(BIN)/python -m benchmarks.figures

bench-grading: venv sandbox $(MATHJAX)  ## seconds per notebook: make grade on ch03 and ch11 classes of N (16), first and again (nothing changed, one changed), beside plain nbgrader; BENCH_ARGS="--help"
	$(BIN)/python -m benchmarks.grading $(or $(N),16) $(BENCH_ARGS)

bench-grading-cluster: venv sandbox  ## seconds per notebook: make grade here beside make grade CLUSTER=... on two workers of this machine (ch03, ch11, N=16); BENCH_ARGS="--help"
	OMP_NUM_THREADS=1 $(BIN)/python -m benchmarks.grading_cluster $(or $(N),16) $(BENCH_ARGS)

test-device: venv  ## the tests that compute on a device, on DEVICE (default cuda; benchmarks/gpu.py's DEVICE_TESTS)
	@export COURSE_TEST_DEVICE=$(or $(DEVICE),cuda); \
	  $(IN_TEST_FOLDER) $(PYTEST_ARGS) $$($(BIN)/python -c 'from benchmarks.gpu import DEVICE_TESTS; print(*DEVICE_TESTS)')

bench-gpu: venv  ## chapter 8's measurements and chapter 11's sweep on a CUDA GPU (benchmarks.gpu), recorded for the chapters; NANOGPT=DIR (a nanoGPT checkout) adds the side-by-side run; ARGS="--help"
	$(BIN)/python -m benchmarks.gpu $${NANOGPT:+--nanogpt "$$NANOGPT"} $(ARGS)

bench-compile: venv  ## what torch.compile costs make train and when it pays back: fp32, bf16, compiled cold and warm, whole and by layers; recorded; ARGS="--steps 300 -- --eval-examples 200"
	$(BIN)/python -m benchmarks.compile_cost --record $(ARGS)

train: venv  ## train the capstone Transformer (dates task, best device); options: ARGS="--help"
	$(BIN)/python -m attention_course.trainer $(ARGS)

generate: venv  ## continue a prompt with a published checkpoint in the course's layers, timed beside transformers; ARGS="--model gpt2 --prompt '...' --tokens 50"
	@test -n "$(ARGS)" || { echo "usage: make generate ARGS=\"--model gpt2 --prompt 'Attention is' --tokens 50\"   (a Hugging Face Hub name, or a local folder)"; exit 2; }
	$(BIN)/python -m attention_course.published.generate $(ARGS)

bench-transformer: venv  ## tokens/s of the course's Transformer vs the same model from torch.nn layers
	$(BIN)/python -m benchmarks.transformer $(ARGS)

bench-generate: venv  ## tokens/s of generation with and without the key/value cache, and torch.nn layers; ARGS="--quick"
	$(BIN)/python -m benchmarks.generate $(ARGS)

bench-pretrained: venv  ## make generate on GPT-2- and SmolLM-135M-sized checkpoints (random weights, offline), beside transformers
	$(BIN)/python -m benchmarks.figures --run pretrained $(ARGS)

clean:  ## remove the built book and grading state (keeps .venv and submitted/)
	rm -rf _build autograded feedback grades gradebook.db .pytest_cache runs
