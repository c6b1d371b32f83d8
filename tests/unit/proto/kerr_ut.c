/* kerr_ut.c: the generated error codes and api keys (kerr.h, from kgen.py) against
 * Kafka's numbers: spot checks and counts, the name tables against the enums and the
 * codec's api table, and every row of the error table in
 * shared/kafka-protocol/README.md section 7 (path given as argv[1]; that test is
 * left out when the file is absent). */
#include "kerr.h"
#include "kmsg.h"

#include <CUnit/Basic.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UT_LINE_BYTES_MAX 512
#define UT_SHARED_ROWS_MIN 50   /* section 7 lists 71 codes; fewer means the parse broke */

static const char *ut_readme;

/* A few numbers every client depends on, written out by hand from Errors.java. */
static void test_kerr_values(void)
{
	CU_ASSERT_EQUAL(KERR_UNKNOWN_SERVER_ERROR, -1);
	CU_ASSERT_EQUAL(KERR_NONE, 0);
	CU_ASSERT_EQUAL(KERR_CORRUPT_MESSAGE, 2);
	CU_ASSERT_EQUAL(KERR_NOT_LEADER_OR_FOLLOWER, 6);
	CU_ASSERT_EQUAL(KERR_OFFSET_METADATA_TOO_LARGE, 12);
	CU_ASSERT_EQUAL(KERR_COORDINATOR_LOAD_IN_PROGRESS, 14);
	CU_ASSERT_EQUAL(KERR_NOT_COORDINATOR, 16);
	CU_ASSERT_EQUAL(KERR_REBALANCE_IN_PROGRESS, 27);
	CU_ASSERT_EQUAL(KERR_UNSUPPORTED_VERSION, 35);
	CU_ASSERT_EQUAL(KERR_INVALID_PRODUCER_EPOCH, 47);
	CU_ASSERT_EQUAL(KERR_CONCURRENT_TRANSACTIONS, 51);
	CU_ASSERT_EQUAL(KERR_KAFKA_STORAGE_ERROR, 56);
	CU_ASSERT_EQUAL(KERR_GROUP_MAX_SIZE_REACHED, 81);
	CU_ASSERT_EQUAL(KERR_PRODUCER_FENCED, 90);
	CU_ASSERT_EQUAL(KERR_TRANSACTIONAL_ID_NOT_FOUND, 105);
	CU_ASSERT_EQUAL(KERR_INVALID_REGISTRATION, 119);
	/* Kafka 3.7.1 has every code from -1 to 119, none missing. */
	CU_ASSERT_EQUAL(KERR_CODE_MIN, -1);
	CU_ASSERT_EQUAL(KERR_CODE_MAX, 119);
	CU_ASSERT_EQUAL(KERR_CODES_N, 121);
}

static void test_kerr_names(void)
{
	CU_ASSERT_STRING_EQUAL(kerr_name(KERR_NONE), "NONE");
	CU_ASSERT_STRING_EQUAL(kerr_name(-1), "UNKNOWN_SERVER_ERROR");
	CU_ASSERT_STRING_EQUAL(kerr_name(51), "CONCURRENT_TRANSACTIONS");
	CU_ASSERT_STRING_EQUAL(kerr_name(KERR_INVALID_REGISTRATION), "INVALID_REGISTRATION");
	CU_ASSERT_PTR_NULL(kerr_name(KERR_CODE_MIN - 1));
	CU_ASSERT_PTR_NULL(kerr_name(KERR_CODE_MAX + 1));
	CU_ASSERT_PTR_NULL(kerr_name(32767));
	int n = 0;
	for (int c = KERR_CODE_MIN; c <= KERR_CODE_MAX; c++)
		n += kerr_name(c) != NULL;
	CU_ASSERT_EQUAL(n, KERR_CODES_N);
}

/* "AddPartitionsToTxn" and "ADD_PARTITIONS_TO_TXN" are the same name. */
static bool ut_same_name(const char *camel, const char *upper)
{
	for (;; camel++, upper++) {
		if (*upper == '_')
			upper++;
		if (*camel == '\0' || *upper == '\0')
			return *camel == *upper;
		if (toupper((unsigned char)*camel) != *upper)
			return false;
	}
}

static void test_kapi(void)
{
	CU_ASSERT_EQUAL(KAPI_PRODUCE, 0);
	CU_ASSERT_EQUAL(KAPI_FETCH, 1);
	CU_ASSERT_EQUAL(KAPI_METADATA, 3);
	CU_ASSERT_EQUAL(KAPI_JOIN_GROUP, 11);
	CU_ASSERT_EQUAL(KAPI_API_VERSIONS, 18);
	CU_ASSERT_EQUAL(KAPI_INIT_PRODUCER_ID, 22);
	CU_ASSERT_EQUAL(KAPI_ADD_PARTITIONS_TO_TXN, 24);
	CU_ASSERT_EQUAL(KAPI_WRITE_TXN_MARKERS, 27);
	CU_ASSERT_EQUAL(KAPI_TXN_OFFSET_COMMIT, 28);
	CU_ASSERT_EQUAL(KAPI_LIST_TRANSACTIONS, 66);
	CU_ASSERT_STRING_EQUAL(kapi_name(KAPI_END_TXN), "END_TXN");
	CU_ASSERT_PTR_NULL(kapi_name(-1));
	CU_ASSERT_EQUAL(KAPI_DELETE_RECORDS, 21);
	CU_ASSERT_STRING_EQUAL(kapi_name(KAPI_DELETE_RECORDS), "DELETE_RECORDS");
	CU_ASSERT_PTR_NULL(kapi_name(4));      /* LeaderAndIsr: no schema here */
	CU_ASSERT_PTR_NULL(kapi_name(KAPI_KEY_MAX + 1));
	/* The enum and the codec's api table come from the same schemas: same keys. */
	int n = 0;
	for (int k = 0; k <= KWIRE_API_KEY_MAX; k++) {
		const struct kapi_info *i = kapi_info((int16_t)k);
		const char *name = kapi_name(k);
		CU_ASSERT_EQUAL(i != NULL, name != NULL);
		if (i == NULL || name == NULL)
			continue;
		n++;
		if (!ut_same_name(i->name, name))
			fprintf(stderr, "api key %d: %s vs %s\n", k, i->name, name);
		CU_ASSERT(ut_same_name(i->name, name));
	}
	CU_ASSERT_EQUAL(n, KAPI_KEYS_N);
}

/* Every "| code | NAME | ..." row of README.md section 7 names the same code here. */
static void test_shared_table(void)
{
	FILE *f = fopen(ut_readme, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	char line[UT_LINE_BYTES_MAX];
	bool in7 = false;
	int rows = 0;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "## ", 3) == 0)
			in7 = strncmp(line, "## 7.", 5) == 0;
		int code;
		char name[128];
		if (!in7 || sscanf(line, "| %d | %127[A-Z0-9_] |", &code, name) != 2)
			continue;
		rows++;
		const char *ours = kerr_name(code);
		if (ours == NULL || strcmp(ours, name) != 0)
			fprintf(stderr, "README row %d %s: kerr_name says %s\n", code, name,
				ours ? ours : "(none)");
		CU_ASSERT(ours != NULL && strcmp(ours, name) == 0);
	}
	fclose(f);
	CU_ASSERT(rows >= UT_SHARED_ROWS_MIN);
}

int main(int argc, char **argv)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	CU_pSuite s = CU_add_suite("kerr", NULL, NULL);
	CU_add_test(s, "enum kerr values", test_kerr_values);
	CU_add_test(s, "kerr_name", test_kerr_names);
	CU_add_test(s, "enum kapi and kapi_name against kapi_info", test_kapi);
	FILE *f = argc > 1 ? fopen(argv[1], "r") : NULL;
	if (f != NULL) {
		fclose(f);
		ut_readme = argv[1];
		CU_add_test(s, "shared README section 7 table", test_shared_table);
	} else {
		fprintf(stderr, "kerr_ut: no shared README (%s): its table is not checked\n",
			argc > 1 ? argv[1] : "no argument");
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
