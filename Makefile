# The README's two commands are `make book` and `make test`; the other targets are their steps.
# Every target sets up what it needs, so both work on a fresh clone.

PYTHON   ?= python3
VENV     := .venv
BIN      := $(VENV)/bin
STAMP    := $(VENV)/.installed
DATA     ?= data
JS       := book/js
NB       ?= $(sort $(wildcard notebooks/*.ipynb))

EDITION  ?= book
PORT     ?= 8000
SUBMISSIONS ?= submissions

.PHONY: help install export data diagrams execute js book serve student assignments grade gradebook test lint clean retarget

help:
	@echo "make book   build the site into _build/html (sets up .venv first); EDITION=student: without solutions, into _build/student-site"
	@echo "make serve  serve the built site on http://127.0.0.1:8000 (PORT=...): page 8c's live demo needs http, not a file"
	@echo "make test   run every test: units, notebooks (nbval), export sync, the site in a browser"
	@echo "steps:      install, export, data, diagrams, execute [NB=notebooks/01_patches.ipynb], js, student, lint, clean"
	@echo "coursework: student, assignments, grade SUBMISSIONS=DIR, gradebook [HAND=FILE] (see book/instructors.md)"
	@echo "a fork:     retarget REPOSITORY=https://github.com/OWNER/NAME BRANCH=main (Colab links and installs then name it)"

# --- set-up: a virtual environment with everything in requirements.txt, vitlib editable ---
install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-cache-dir --upgrade pip
	$(BIN)/python -m pip install --quiet --no-cache-dir -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-cache-dir --no-deps -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3" >/dev/null
	touch $@

# --- notebooks -> vitlib/*.py: nbdev's nb_export, each notebook writing its #| default_exp module
# afresh, in the reading order of _toc.yml (scripts/export.py; vitlib/__init__.py is by hand) ---
export: $(STAMP)
	$(BIN)/python scripts/export.py

# --- Fashion-MNIST into $(DATA)/FashionMNIST/raw: Debian's copy when installed (apt-get install
# dataset-fashion-mnist), else torchvision's download; with neither, an error naming both fixes ---
data: $(STAMP)
	@$(BIN)/python scripts/data.py --root $(DATA)

# --- the diagrams: scripts/diagrams.py draws each into book/diagrams/NAME.svg and attaches it to
# the markdown cell of its notebook that shows it (so Jupyter and Colab show it too); run
# `make student` after it, so that the student edition shows them too ---
diagrams: $(STAMP)
	$(BIN)/python scripts/diagrams.py

# --- run notebooks top to bottom in a fresh kernel, full size, outputs and widget state stored;
# VITLIB_SITE=1: page 8c writes the site's model (book/static/live/) instead of runs/; then the
# set-up page's table of running times and the long pages' notes follow the new runs ---
execute: export data
	env -u VITLIB_SMOKE -u VITLIB_STRICT_CHECKS VITLIB_SITE=1 $(BIN)/python scripts/execute.py $(NB)
	$(BIN)/python scripts/run_times.py

# --- the site's JavaScript, served by the site itself (no CDN): ipywidgets, MathJax and, for page 8c's
# live demo, onnxruntime-web (its WebAssembly build: one module with its loader, one .wasm); npm ci from the lock file ---
js: $(JS)/dist/embed-amd.js

$(JS)/dist/embed-amd.js: $(JS)/package.json $(JS)/package-lock.json
	@command -v npm >/dev/null || { echo "make book needs npm (Node.js) to bundle the widget JavaScript: apt-get install npm, or install Node.js"; exit 1; }
	cd $(JS) && npm ci --no-audit --no-fund --loglevel=error
	rm -rf $(JS)/dist && mkdir -p $(JS)/dist
	cd $(JS)/node_modules/@jupyter-widgets/html-manager/dist && \
	  cp embed-amd.js *.woff *.woff2 *.ttf *.eot *.svg $(CURDIR)/$(JS)/dist/
	cp $(JS)/node_modules/requirejs/require.js $(JS)/dist/
	cp $(JS)/node_modules/mathjax/es5/tex-svg-full.js $(JS)/dist/mathjax-tex-svg.js
	mkdir -p $(JS)/dist/ort
	cp $(JS)/node_modules/onnxruntime-web/dist/ort.wasm.bundle.min.mjs \
	  $(JS)/node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded.wasm $(JS)/dist/ort/

# --- the site: Jupyter Book 1, stored outputs, warnings are errors ---
# (_build/html is removed first: when no page changed, Sphinx would not copy a changed _static file)
# EDITION=student builds a course site without solution bodies (book/sphinx_ext/clean_cells.py)
book: export js
ifeq ($(EDITION),student)
	rm -rf _build/student-site
	VITLIB_EDITION=student $(BIN)/jupyter-book build . --path-output _build/student-site --warningiserror --keep-going
else
	rm -rf _build/html
	$(BIN)/jupyter-book build . --warningiserror --keep-going
endif

# --- the built site over http on 127.0.0.1 (scripts/serve.py, standard library only): browsers
# refuse the live demo's ES module and WebAssembly on a page opened from disk (file://) ---
serve:
	@test -f _build/html/index.html || $(MAKE) book
	@$(PYTHON) scripts/serve.py --port $(PORT)

# --- coursework (scripts/coursework.py): nbgrader metadata from each exercise's prompt, then the
# student edition (solutions and the outputs that give answers away removed) into student/, committed: Colab opens it;
# and the instructors' table of pages (book/coursework_table.md) ---
student: $(STAMP)
	$(BIN)/python scripts/coursework.py annotate
	$(BIN)/python scripts/student_edition.py --out student
	$(BIN)/python scripts/coursework.py guide

# nbgrader's release notebooks, one assignment per chapter page, into _build/assignments
assignments: $(STAMP)
	$(BIN)/python scripts/coursework.py assignments --out _build/assignments

# grade $(SUBMISSIONS)/<student>/<notebook>.ipynb: _build/grades/grades.csv and feedback/ (in smoke
# mode, on the Fashion-MNIST sample that ships with vitlib: no download)
grade: export
	$(BIN)/python scripts/coursework.py grade $(SUBMISSIONS) --out _build/grades $(if $(UNSAFE),--unsafe) $(if $(HAND),--hand $(HAND))

# your scores of the written answers (HAND, default: hand_grades.csv beside $(SUBMISSIONS)) merged
# into _build/grades/grades.csv, and gradebook.csv (one row per student) written, without grading again
gradebook: $(STAMP)
	$(BIN)/python scripts/coursework.py gradebook --submissions $(SUBMISSIONS) $(if $(HAND),--hand $(HAND))

# --- every test; the browser test reads the site that `book` just built. The tests read the
# Fashion-MNIST sample in vitlib/fashion_sample/: no download. What a machine may lack (Chromium,
# a package index) is declared in conftest.py: those tests skip, saying why; under CI=true they fail ---
test: book
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check notebooks vitlib tests benchmarks scripts conftest.py book/sphinx_ext
	$(BIN)/ruff format --check notebooks tests benchmarks scripts conftest.py book/sphinx_ext

clean:
	rm -rf _build $(JS)/dist $(JS)/node_modules .pytest_cache

# --- point the book at a repository and branch (a course's fork): _config.yml, every notebook's
# Colab install line (notebooks/ and student/), the README and the set-up page (scripts/retarget.py,
# standard library only, so no .venv needed); commit and push the result ---
retarget:
	$(PYTHON) scripts/retarget.py --repository='$(REPOSITORY)' --branch='$(BRANCH)'
