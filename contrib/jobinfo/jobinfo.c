/*
 * slurm-dsl-jobinfo NONCE JOBID...: look each job id up with slurmctld's single-job RPC
 * (slurm_load_job, the call `squeue -j <one id>` makes), all in one process, and print what
 * `squeue -h -a -t all -r -O 'JobID:|,ArrayJobID:|,ArrayTaskID:|,State:|,Requeue:|,
 * RestartCnt:|,PriorityLong:|,Reason:|NONCE'` prints for those ids, byte for byte
 * (docs/lookups.md §3; slurm_dsl/lookups/squeue.py reads it with the same strict reader).
 *
 * Why a program of its own: squeue asks slurmctld for one job with one process (~7 ms on the
 * lab) or for every job it holds (a listing: ~1.3 s at 100,000 jobs); this asks for many jobs
 * one by one in one process (~2 ms each).  Built against the installed libslurm's headers
 * (contrib/jobinfo/build), so every field it reads has that Slurm's own layout; a libslurm of
 * another major has another soname and the program does not start (exit 127: the caller uses
 * squeue).
 *
 * `-t THREADS` (1 to 16, default 1): ask that many ids at once, each thread a contiguous share of
 * the ids with RPCs of its own; what is printed is the same whatever the number (each id's
 * answer is printed in the order the ids were given, after every answer is in).  slurmctld
 * answers one RPC in ~0.5 ms on the lab, most of it waiting (for munged and slurmctld's job
 * lock), so a few threads hide most of the wait at the cost of one process start.
 *
 * Exit status: 0 when every id got its answer (its records, or none when slurmctld does not know
 * the id: ESLURM_INVALID_JOB_ID, which is the only error read as "gone"); 1 when any id could
 * not be asked about (no thread starts another id once one fails, nothing is printed on stdout,
 * and the error of the first such id in the order given goes to stderr: the caller reads the
 * whole call as "could not ask"); 2 for arguments it refuses.  Nothing but digits and
 * hex reaches it from the caller, and it prints no field a job's owner chooses except Reason
 * (state_desc), which comes last, before the nonce, as with squeue.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 26.05 takes a slurm_step_id_t where earlier releases take a job id; this lets slurm.h accept
 * the job id in every release (it then fills in a step id; before 26.05 it is not looked at). */
#define SLURM_BACKWARD_COMPAT 1
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

/* Exported by every libslurm since 22.05, not declared in slurm.h. */
extern char *slurm_job_state_string(uint32_t inx);
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(24, 5, 0)
extern const char *slurm_job_state_reason_string(uint32_t inx);
#define REASON_STRING(r) slurm_job_state_reason_string(r)
#else
extern char *slurm_job_reason_string(uint32_t inx);
#define REASON_STRING(r) slurm_job_reason_string(r)
#endif
extern int slurm_bit_test(bitstr_t *b, bitoff_t bit);
extern bitoff_t slurm_bit_ffs(bitstr_t *b);
extern bitoff_t slurm_bit_fls(bitstr_t *b);

#define LARGEST_ID 4294967294UL /* slurm_dsl.core.jobid.MAX_JOB_ID */
#define MAX_IDS 100000          /* ids in one call: far more than a lookup ever asks at once */
#define MAX_THREADS 16

static const char *nonce;

static int usage(const char *why)
{
	fprintf(stderr, "slurm-dsl-jobinfo: %s\nusage: slurm-dsl-jobinfo [-t THREADS] NONCE JOBID...\n", why);
	return 2;
}

/* A job id as slurm_dsl.core.jobid accepts a plain one: 1 to MAX_JOB_ID, digits only, no
 * leading zero. */
static int parse_id(const char *text, uint32_t *out)
{
	size_t len = strlen(text);
	unsigned long long value = 0;

	if (len == 0 || len > 10 || text[0] == '0')
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (text[i] < '0' || text[i] > '9')
			return -1;
		value = value * 10 + (unsigned long long)(text[i] - '0');
	}
	if (value > LARGEST_ID)
		return -1;
	*out = (uint32_t)value;
	return 0;
}

static int parse_nonce(const char *text)
{
	size_t len = strlen(text);

	if (len < 32 || len > 128)
		return -1;
	for (size_t i = 0; i < len; i++)
		if (!((text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f')))
			return -1;
	return 0;
}

/* One line, as squeue's print functions write it (src/squeue/print.c): JobID (%u of job_id),
 * ArrayJobID (array_job_id for an array's record, else job_id), ArrayTaskID (task, or N/A),
 * State (job_state_string), Requeue, RestartCnt, PriorityLong, Reason (state_desc if set, else
 * the reason's name), then the nonce. */
static void print_line(const slurm_job_info_t *job, int is_array, uint32_t task)
{
	const char *reason = job->state_desc ? job->state_desc : REASON_STRING(job->state_reason);
	const char *state = slurm_job_state_string(job->job_state);

	printf("%" PRIu32 "|%" PRIu32 "|", job->job_id, is_array ? job->array_job_id : job->job_id);
	if (is_array)
		printf("%" PRIu32 "|", task);
	else
		fputs("N/A|", stdout);
	printf("%s|%u|%u|%" PRIu32 "|%s|%s\n", state ? state : "(null)", (unsigned)job->requeue,
	       (unsigned)job->restart_cnt, job->priority, reason ? reason : "(null)", nonce);
}

/* A record holding several pending tasks of an array (array_task_str set) is printed once per
 * task, as `squeue -r` does; its tasks are read from the bitmap libslurm builds from
 * slurmctld's hex mask (array_bitmap), which is exact where array_task_str may be cut short. */
static int print_record(const slurm_job_info_t *job)
{
	if (job->array_task_str && job->array_task_str[0]) {
		bitstr_t *tasks = job->array_bitmap;
		bitoff_t first, last;

		if (!tasks) {
			fprintf(stderr, "slurm-dsl-jobinfo: job %" PRIu32 ": tasks '%.60s' without a bitmap\n",
				job->job_id, job->array_task_str);
			return -1;
		}
		first = slurm_bit_ffs(tasks);
		last = first < 0 ? -2 : slurm_bit_fls(tasks);
		for (bitoff_t i = first; i >= 0 && i <= last; i++)
			if (slurm_bit_test(tasks, i))
				print_line(job, 1, (uint32_t)i);
		return 0;
	}
	if (job->array_task_str) /* empty: no task left in the record, squeue prints none */
		return 0;
	print_line(job, job->array_task_id != NO_VAL, job->array_task_id);
	return 0;
}

/* slurm_load_job asks slurmctld whether this cluster is in a federation before every job (one
 * RPC more each) unless SHOW_LOCAL is set; squeue lets it.  Asked once here: not in one, every
 * load is local, which is what slurm_load_job would decide each time; in one (or unsure), each
 * load decides for itself, as with squeue. */
static int local_flags(uint16_t *show)
{
	void *fed = NULL;
	int rc;

	errno = 0;
	rc = slurm_load_federation(&fed);
	*show = SHOW_ALL;
	if (rc == SLURM_SUCCESS && !fed)
		*show |= SHOW_LOCAL;
	if (fed)
		slurm_destroy_federation_rec(fed);
	/* slurmctld could not be reached: no load would be answered either (each would wait as long
	 * again, twice: its own federation question, then the job), so none is asked. */
	if (rc != SLURM_SUCCESS && errno >= SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR &&
	    errno <= SLURMCTLD_COMMUNICATIONS_SHUTDOWN_ERROR) {
		fprintf(stderr, "slurm_load_federation error: %s\n", slurm_strerror(errno));
		return -1;
	}
	return 0;
}

static int seen(const uint32_t *ids, size_t count, uint32_t id)
{
	for (size_t i = 0; i < count; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

/* Every id's answer: its message (NULL when slurmctld does not know the id, or it was never
 * asked), or the error it got.  Each thread fills the slots of its own share only. */
struct answers {
	const uint32_t *ids;
	job_info_msg_t **msgs;
	int *codes; /* SLURM_SUCCESS, or the error that ended this id's share */
	uint16_t show;
	int stop; /* set once any id could not be asked: the others ask no more */
	pthread_mutex_t lock;
};

struct share {
	struct answers *all;
	size_t from, to;
};

static int stopped(struct answers *all)
{
	int stop;

	pthread_mutex_lock(&all->lock);
	stop = all->stop;
	pthread_mutex_unlock(&all->lock);
	return stop;
}

/* One id, as `squeue -j <id>` asks it: SLURM_SUCCESS with its message (NULL: gone), or the code
 * of what went wrong. */
static int load_one(uint32_t id, uint16_t show, job_info_msg_t **out)
{
	job_info_msg_t *msg = NULL;
	int rc, code;

	errno = 0;
	rc = slurm_load_job(&msg, id, show);
	/* SLURM_ERROR with the code in errno (slurm_get_errno() is errno; 24.11 drops its name), or
	 * the code slurmctld answered (src/api/job_info.c, the same in 22.05 to 26.05). */
	if (rc == SLURM_SUCCESS)
		code = msg ? SLURM_SUCCESS : SLURM_UNEXPECTED_MSG_ERROR;
	else if ((code = rc == SLURM_ERROR ? errno : rc) == SLURM_SUCCESS)
		code = SLURM_ERROR; /* failed without saying why: could not ask */
	if (code == ESLURM_INVALID_JOB_ID)
		code = SLURM_SUCCESS; /* slurmctld does not know the id: gone */
	if (code != SLURM_SUCCESS || !msg || msg->record_count == 0) {
		if (msg)
			slurm_free_job_info_msg(msg);
		msg = NULL;
	}
	*out = msg;
	return code;
}

static void *ask_share(void *arg)
{
	struct share *share = arg;
	struct answers *all = share->all;

	for (size_t i = share->from; i < share->to; i++) {
		if (stopped(all))
			break;
		all->codes[i] = load_one(all->ids[i], all->show, &all->msgs[i]);
		if (all->codes[i] != SLURM_SUCCESS) {
			pthread_mutex_lock(&all->lock);
			all->stop = 1;
			pthread_mutex_unlock(&all->lock);
			break;
		}
	}
	return NULL;
}

/* Every id asked, ``threads`` at a time; 0 when all were answered, else -1 with the error of the
 * first id (in the order given) that could not be asked on stderr.  Called after the federation
 * question, made by this thread alone: that first RPC sets up what libslurm sets up lazily (the
 * auth plugin, slurm.conf, the message timeout), so the threads only make RPCs, each with its own
 * messages, as a threaded libslurm program (slurmrestd's workers) does. */
static int ask_all(struct answers *all, size_t count, size_t threads)
{
	pthread_t tids[MAX_THREADS];
	struct share shares[MAX_THREADS];
	size_t size = (count + threads - 1) / threads, started = 0;

	for (size_t t = 0; t < threads && t * size < count; t++) {
		shares[t].all = all;
		shares[t].from = t * size;
		shares[t].to = (t + 1) * size < count ? (t + 1) * size : count;
		if (t == 0)
			continue; /* the first share is this thread's own, below */
		if (pthread_create(&tids[t], NULL, ask_share, &shares[t]) != 0) {
			pthread_mutex_lock(&all->lock);
			all->stop = 1;
			pthread_mutex_unlock(&all->lock);
			fprintf(stderr, "slurm-dsl-jobinfo: cannot start a thread\n");
			for (size_t j = 1; j < t; j++)
				pthread_join(tids[j], NULL);
			return -1;
		}
		started = t;
	}
	ask_share(&shares[0]);
	for (size_t t = 1; t <= started; t++)
		pthread_join(tids[t], NULL);
	for (size_t i = 0; i < count; i++) {
		int code = all->codes[i];

		if (code != SLURM_SUCCESS) {
			fprintf(stderr, "slurm_load_job error for job %" PRIu32 ": %s\n", all->ids[i],
				code > 0 ? slurm_strerror(code) : "unknown error");
			return -1;
		}
	}
	return 0;
}

static int parse_threads(const char *text, size_t *out)
{
	if (text[0] < '1' || text[0] > '9' || (text[1] && (text[1] < '0' || text[1] > '9' || text[2])))
		return -1;
	*out = (size_t)atoi(text);
	return *out <= MAX_THREADS ? 0 : -1;
}

int main(int argc, char **argv)
{
	uint32_t *ids, *printed;
	size_t count, printed_count = 0, printed_room, threads = 1;
	struct answers all = {.lock = PTHREAD_MUTEX_INITIALIZER};
	int first = 1;

	if (argc >= 2 && strcmp(argv[1], "-t") == 0) {
		if (argc < 3 || parse_threads(argv[2], &threads) != 0)
			return usage("-t takes a number of threads from 1 to 16");
		first = 3;
	}
	if (argc - first < 2)
		return usage("a nonce and at least one job id are needed");
	if (parse_nonce(argv[first]) != 0)
		return usage("the nonce must be 32 to 128 lowercase hex digits");
	nonce = argv[first];
	count = (size_t)(argc - first - 1);
	if (count > MAX_IDS)
		return usage("too many job ids");
	ids = calloc(count, sizeof(*ids));
	printed_room = count * 4 + 16;
	printed = calloc(printed_room, sizeof(*printed));
	all.msgs = calloc(count, sizeof(*all.msgs));
	all.codes = calloc(count, sizeof(*all.codes));
	if (!ids || !printed || !all.msgs || !all.codes) {
		fprintf(stderr, "slurm-dsl-jobinfo: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < count; i++)
		if (parse_id(argv[first + 1 + i], &ids[i]) != 0)
			return usage("a job id must be a number from 1 to 4294967294");

	slurm_init(NULL);
	all.ids = ids;
	if (local_flags(&all.show) != 0)
		return 1;
	if (ask_all(&all, count, threads > count ? count : threads) != 0)
		return 1;
	for (size_t i = 0; i < count; i++) {
		job_info_msg_t *msg = all.msgs[i];

		for (uint32_t r = 0; msg && r < msg->record_count; r++) {
			const slurm_job_info_t *job = &msg->job_array[r];

			/* What `squeue -j <id>` keeps of slurm_load_job's answer (_filter_job).  job_id
			 * is set from 26.05's step_id.job_id on unpack, for programs like this one. */
			if (job->job_id == 0 || !(job->job_id == ids[i] || job->array_job_id == ids[i] ||
						  job->het_job_id == ids[i]))
				continue;
			if (seen(printed, printed_count, job->job_id))
				continue; /* asked twice, or an array and one of its tasks: printed once */
			if (printed_count == printed_room) {
				uint32_t *more = realloc(printed, 2 * printed_room * sizeof(*printed));
				if (!more) {
					fprintf(stderr, "slurm-dsl-jobinfo: out of memory\n");
					return 1;
				}
				printed = more;
				printed_room *= 2;
			}
			printed[printed_count++] = job->job_id;
			if (print_record(job) != 0)
				return 1;
		}
		if (msg)
			slurm_free_job_info_msg(msg);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "slurm-dsl-jobinfo: writing the answer failed: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
