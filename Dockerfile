# syntax=docker/dockerfile:1
# The gradgate container image: the `gradgate` binary (gateway, control, validate), libgradgate and
# the Python package, on Debian 12 with the CUDA runtime from NVIDIA's apt repository.
#
#   docker build -t gradgate:0.1.0 .
#   docker run --rm -v "$PWD/config:/etc/gradgate:ro" gradgate:0.1.0 \
#     validate -c /etc/gradgate/gateway.yaml
#
# Training images take the Python package (libgradgate.so is inside it) from this image:
#   COPY --from=gradgate:0.1.0 /opt/gradgate/python /opt/gradgate/python
#   ENV PYTHONPATH=/opt/gradgate/python        (or: pip install /opt/gradgate/python)
#
# The Debian packages come from tools/packages/build.txt and runtime.txt, the lists gradgate.sh
# installs; the build fails when runtime.txt lacks a library the binary needs.

ARG CUDA_VERSION=13.0
ARG CUDA_REPOSITORY=https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64

FROM debian:12 AS builder
ARG CUDA_VERSION
ARG CUDA_REPOSITORY
# Real code for each GPU generation from Turing (the oldest CUDA 13 supports) to Blackwell, plus
# PTX of the newest for GPUs after it.
ARG CUDA_ARCHITECTURES="75-real;80-real;86-real;89-real;90-real;100-real;120"
ARG DEBIAN_FRONTEND=noninteractive
ADD ${CUDA_REPOSITORY}/cuda-keyring_1.1-1_all.deb /tmp/cuda-keyring.deb
COPY tools/packages/build.txt /tmp/build.txt
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && dpkg -i /tmp/cuda-keyring.deb \
 && apt-get update \
 && cuda_suffix=$(echo "$CUDA_VERSION" | tr . -) \
 && sed 's/#.*//' /tmp/build.txt | xargs apt-get install -y --no-install-recommends \
      "cuda-nvcc-$cuda_suffix" "cuda-cudart-dev-$cuda_suffix" "libcublas-dev-$cuda_suffix" \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . .
# The build-tree RUNPATH is made relative ($ORIGIN) so that no path of this stage ends up in the
# binary; the runtime stage finds libgradgate through the loader's cache.
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRADGATE_WERROR=ON \
      -DGRADGATE_BUILD_TESTS=OFF -DGRADGATE_BUILD_APPS=ON \
      -DGRADGATE_WITH_CUDA=ON -DGRADGATE_WITH_DPDK=ON \
      -DCMAKE_CUDA_COMPILER="/usr/local/cuda-$CUDA_VERSION/bin/nvcc" \
      -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHITECTURES" \
      -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON \
 && cmake --build build --target gradgate gradgate_client \
 && tools/deploy/check-runtime-packages.sh build/cli/gradgate \
      "cuda-cudart-$(echo "$CUDA_VERSION" | tr . -)" "libcublas-$(echo "$CUDA_VERSION" | tr . -)"

# Everything the runtime stage copies, laid out as in its file system.
RUN install -D -m 0755 build/cli/gradgate /staging/usr/local/bin/gradgate \
 && install -D -m 0644 build/client/libgradgate.so.0 /staging/usr/local/lib/libgradgate.so.0 \
 && install -D -m 0644 client/include/gradgate/client.h \
      /staging/usr/local/include/gradgate/client.h \
 && mkdir -p /staging/opt/gradgate \
 && cp -r client/python /staging/opt/gradgate/python \
 && install -m 0644 build/client/libgradgate.so.0 \
      /staging/opt/gradgate/python/gradgate/libgradgate.so

FROM debian:12-slim
ARG CUDA_VERSION
ARG CUDA_REPOSITORY
# DPDK drivers of the NICs whose ports (SR-IOV virtual functions) the DPDK transport may run on:
# Intel E810/X710 (iavf) and NVIDIA ConnectX (mlx5). The EAL loads them from its driver directory.
ARG DPDK_DRIVERS="librte-net-iavf23 librte-net-mlx5-23"
ARG DEBIAN_FRONTEND=noninteractive
LABEL org.opencontainers.image.title="gradgate" \
      org.opencontainers.image.description="Gradient-compression gateway for distributed training"
ADD ${CUDA_REPOSITORY}/cuda-keyring_1.1-1_all.deb /tmp/cuda-keyring.deb
COPY tools/packages/runtime.txt /tmp/runtime.txt
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && dpkg -i /tmp/cuda-keyring.deb \
 && apt-get update \
 && sed 's/#.*//' /tmp/runtime.txt | xargs apt-get install -y --no-install-recommends \
      "cuda-cudart-$(echo "$CUDA_VERSION" | tr . -)" "libcublas-$(echo "$CUDA_VERSION" | tr . -)" \
      $DPDK_DRIVERS \
 && echo "/usr/local/cuda-$CUDA_VERSION/targets/x86_64-linux/lib" \
      > /etc/ld.so.conf.d/gradgate-cuda.conf \
 && rm -rf /var/lib/apt/lists/* /tmp/cuda-keyring.deb /tmp/runtime.txt

COPY --from=builder /staging/ /
RUN ldconfig && gradgate version

# What the NVIDIA Container Toolkit reads to mount the driver (libcuda) and the GPUs: all of the
# node's, since the gateway holds no GPU of its own (the training pods do) but codes on theirs.
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER 65532:65532
ENTRYPOINT ["gradgate"]
CMD ["--help"]
