// rawloop: the baseline of BenchmarkLayerCost. It does with libfabric
// directly what the Go benchmark does through goverbs: two connected
// FI_EP_MSG endpoints in one process, a target thread spinning on its CQ
// (progressing it, as the target's application would), and an initiator
// that posts WRITEs of SIZE bytes, WINDOW at a time, and spins on its CQ
// until they complete. It prints the nanoseconds per WRITE, wall time and
// the initiator thread's CPU time.
//
//   rawloop PROVIDER SIZE ITERS WINDOW delivery|transmit
//
// Build: cc -O2 -o rawloop rawloop.c -lfabric -lpthread
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <pthread.h>
#include <time.h>
#include <arpa/inet.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_errno.h>

#define CHK(x) do { int _r = (x); if (_r < 0) { fprintf(stderr, "%s: %s\n", #x, fi_strerror(-_r)); exit(1); } } while (0)

static struct fi_info *info;
static struct fid_fabric *fab;
static struct fid_domain *dom;
static struct fid_eq *eq;
static volatile int stop;
static struct fid_cq *tcq;

static void wait_event(uint32_t want, struct fi_eq_cm_entry *e) {
	uint32_t ev;
	for (;;) {
		ssize_t r = fi_eq_sread(eq, &ev, e, sizeof *e + 256, 1000, 0);
		if (r == -FI_EAVAIL) { struct fi_eq_err_entry ee = {0}; fi_eq_readerr(eq, &ee, 0); fprintf(stderr, "eq error %d\n", ee.err); exit(1); }
		if (r < 0) continue;
		if (ev == want) return;
	}
}

static void *target(void *arg) {
	struct fi_cq_data_entry c[16];
	while (!stop) fi_cq_read(tcq, c, 16);
	return NULL;
}

static double clk(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static double now(void) { return clk(CLOCK_MONOTONIC); }

int main(int argc, char **argv) {
	if (argc != 6) { fprintf(stderr, "usage: rawloop PROVIDER SIZE ITERS WINDOW delivery|transmit\n"); return 2; }
	size_t size = atol(argv[2]);
	long iters = atol(argv[3]);
	int window = atoi(argv[4]);
	uint64_t flags = FI_COMPLETION | (strcmp(argv[5], "delivery") == 0 ? FI_DELIVERY_COMPLETE : 0);

	struct fi_info *hints = fi_allocinfo();
	hints->fabric_attr->prov_name = strdup(argv[1]);
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG | FI_RMA;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
	CHK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	CHK(fi_fabric(info->fabric_attr, &fab, NULL));
	struct fi_eq_attr eqa = { .wait_obj = FI_WAIT_UNSPEC };
	CHK(fi_eq_open(fab, &eqa, &eq, NULL));
	CHK(fi_domain(fab, info, &dom, NULL));

	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_DATA, .size = 1024 };
	struct fid_cq *icq;
	CHK(fi_cq_open(dom, &cqa, &icq, NULL));
	CHK(fi_cq_open(dom, &cqa, &tcq, NULL));

	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = 0 };
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	struct fi_info *pi = fi_dupinfo(info);
	free(pi->src_addr); pi->src_addr = malloc(sizeof sin); memcpy(pi->src_addr, &sin, sizeof sin); pi->src_addrlen = sizeof sin;
	free(pi->dest_addr); pi->dest_addr = NULL; pi->dest_addrlen = 0;
	pi->addr_format = FI_SOCKADDR_IN;
	struct fid_pep *pep;
	CHK(fi_passive_ep(fab, pi, &pep, NULL));
	CHK(fi_pep_bind(pep, &eq->fid, 0));
	CHK(fi_listen(pep));
	size_t alen = sizeof sin;
	CHK(fi_getname(&pep->fid, &sin, &alen));

	struct fi_info *ci = fi_dupinfo(info);
	free(ci->src_addr); ci->src_addr = NULL; ci->src_addrlen = 0;
	struct fid_ep *iep, *tep;
	CHK(fi_endpoint(dom, ci, &iep, NULL));
	CHK(fi_ep_bind(iep, &eq->fid, 0));
	CHK(fi_ep_bind(iep, &icq->fid, FI_TRANSMIT | FI_RECV));
	CHK(fi_enable(iep));
	CHK(fi_connect(iep, &sin, NULL, 0));
	struct { struct fi_eq_cm_entry e; char data[256]; } ev;
	wait_event(FI_CONNREQ, &ev.e);
	CHK(fi_endpoint(dom, ev.e.info, &tep, NULL));
	CHK(fi_ep_bind(tep, &eq->fid, 0));
	CHK(fi_ep_bind(tep, &tcq->fid, FI_TRANSMIT | FI_RECV));
	CHK(fi_enable(tep));
	CHK(fi_accept(tep, NULL, 0));
	wait_event(FI_CONNECTED, &ev.e);
	wait_event(FI_CONNECTED, &ev.e);

	char *src = aligned_alloc(4096, size + 4096), *dst = aligned_alloc(4096, size + 4096);
	memset(src, 1, size); memset(dst, 0, size);
	struct fid_mr *smr, *dmr;
	CHK(fi_mr_reg(dom, src, size, FI_WRITE | FI_SEND, 0, 1, 0, &smr, NULL));
	CHK(fi_mr_reg(dom, dst, size, FI_REMOTE_WRITE, 0, 2, 0, &dmr, NULL));
	uint64_t raddr = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)dst : 0;
	uint64_t rkey = fi_mr_key(dmr);
	void *desc = fi_mr_desc(smr);

	pthread_t th;
	pthread_create(&th, NULL, target, NULL);
	struct fi_context2 ctx[256];
	struct iovec iov = { src, size };
	struct fi_rma_iov rma = { raddr, size, rkey };
	struct fi_cq_data_entry c[64];
	long warm = iters / 10 + 1;
	double t0 = 0, c0 = 0;
	for (long done = 0, posted = 0; done < iters + warm;) {
		if (t0 == 0 && done >= warm) { t0 = now(); c0 = clk(CLOCK_THREAD_CPUTIME_ID); }
		while (posted - done < window && posted < iters + warm) {
			struct fi_msg_rma m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .rma_iov = &rma, .rma_iov_count = 1, .context = &ctx[posted % 256] };
			ssize_t r = fi_writemsg(iep, &m, flags);
			if (r == -FI_EAGAIN) break;
			CHK(r);
			posted++;
		}
		ssize_t n = fi_cq_read(icq, c, 64);
		if (n > 0) done += n;
		else if (n != -FI_EAGAIN) { fprintf(stderr, "cq: %s\n", fi_strerror(-n)); return 1; }
	}
	double t1 = now(), c1 = clk(CLOCK_THREAD_CPUTIME_ID);
	printf("%.1f %.1f\n", (t1 - t0) / iters, (c1 - c0) / iters);
	stop = 1;
	pthread_join(th, NULL);
	return 0;
}
