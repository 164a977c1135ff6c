// Golden bytes of Apache Kafka Connect's embedded group protocol, produced by the real Java classes.
//
//   java -cp "$CLASSPATH:." GoldenProtocol golden          prints "name hex" lines (see regenerate.sh)
//   java -cp "$CLASSPATH:." GoldenProtocol decode          reads "metadata HEX" / "assignment HEX" lines
//                                                          on stdin and answers each with
//                                                          "OK <hex re-encoded by Java> <toString>" or
//                                                          "ERR <exception>"
//
// The decode mode is how kconnect's interop test checks that Java reads what kconnect writes: Java
// decodes the bytes exactly as WorkerCoordinator and the assignors do (always through
// IncrementalCooperativeConnectProtocol, whatever the version), then serializes the result again with
// the serializer of the same version, so a field Java misread would show up as a difference.
// This file only calls Kafka's public static serializers; it contains no Kafka code.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.List;

import org.apache.kafka.common.message.JoinGroupRequestData.JoinGroupRequestProtocol;
import org.apache.kafka.common.message.JoinGroupRequestData.JoinGroupRequestProtocolCollection;
import org.apache.kafka.connect.runtime.distributed.ConnectProtocol;
import org.apache.kafka.connect.runtime.distributed.ExtendedAssignment;
import org.apache.kafka.connect.runtime.distributed.ExtendedWorkerState;
import org.apache.kafka.connect.runtime.distributed.IncrementalCooperativeConnectProtocol;
import org.apache.kafka.connect.util.ConnectorTaskId;

public class GoldenProtocol {
    private static final short NO_ERROR = ConnectProtocol.Assignment.NO_ERROR;
    private static final short CONFIG_MISMATCH = ConnectProtocol.Assignment.CONFIG_MISMATCH;

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "golden";
        if (mode.equals("golden")) {
            golden();
        } else if (mode.equals("decode")) {
            decode();
        } else {
            System.err.println("usage: GoldenProtocol golden|decode");
            System.exit(2);
        }
    }

    // ---- golden mode -----------------------------------------------------------------------------

    private static void golden() {
        // Subscriptions (member metadata).
        ConnectProtocol.WorkerState plain = new ConnectProtocol.WorkerState("http://w1:8083/", 42L);
        emit("md_v0_basic", ConnectProtocol.serializeMetadata(plain));
        emit("md_v0_unicode", ConnectProtocol.serializeMetadata(
                new ConnectProtocol.WorkerState("http://\u00fcn\u00efc\u00f8d\u00e9:8083/\u2603\uD83D\uDCA1", -1L)));
        emit("md_v1_null_allocation",
                IncrementalCooperativeConnectProtocol.serializeMetadata(new ExtendedWorkerState("http://w1:8083/", 7L, null), false));
        emit("md_v2_null_allocation",
                IncrementalCooperativeConnectProtocol.serializeMetadata(new ExtendedWorkerState("http://w1:8083/", 7L, null), true));
        emit("md_v1_empty_singleton_allocation", IncrementalCooperativeConnectProtocol.serializeMetadata(
                new ExtendedWorkerState("http://w1:8083/", 7L, ExtendedAssignment.empty()), false));

        ExtendedAssignment owned = new ExtendedAssignment((short) 1, NO_ERROR, "leader-1", "http://leader:8083/", 12L,
                list("c1"), tasks("c1", 0, 1), list(), tasks(), 0);
        emit("md_v1_allocation",
                IncrementalCooperativeConnectProtocol.serializeMetadata(new ExtendedWorkerState("http://w2:8083/", 12L, owned), false));
        ExtendedAssignment ownedV2 = new ExtendedAssignment((short) 2, NO_ERROR, "leader-1", "http://leader:8083/", 13L,
                list("c1"), tasks("c1", 0), list("c2"), tasks("c2", 1), 5000);
        emit("md_v2_allocation",
                IncrementalCooperativeConnectProtocol.serializeMetadata(new ExtendedWorkerState("http://w2:8083/", 13L, ownedV2), true));
        // The metadata version, not the allocation's own version, decides the allocation's header.
        emit("md_v1_allocation_of_v2_assignment",
                IncrementalCooperativeConnectProtocol.serializeMetadata(new ExtendedWorkerState("http://w2:8083/", 13L, ownedV2), false));
        ExtendedAssignment emptyLists = new ExtendedAssignment((short) 2, NO_ERROR, "leader-1", "http://leader:8083/", 3L,
                list(), tasks(), list(), tasks(), 0);
        emit("md_v2_allocation_empty_lists",
                IncrementalCooperativeConnectProtocol.serializeMetadata(new ExtendedWorkerState("http://w3:8083/", 3L, emptyLists), true));

        // What a worker sends in JoinGroup for each connect.protocol (WorkerCoordinator.metadata()).
        ExtendedWorkerState joining = new ExtendedWorkerState("http://w2:8083/", 13L, ownedV2);
        emitJoin("join_eager", ConnectProtocol.metadataRequest(joining));
        emitJoin("join_compatible", IncrementalCooperativeConnectProtocol.metadataRequest(joining, false));
        emitJoin("join_sessioned", IncrementalCooperativeConnectProtocol.metadataRequest(joining, true));
        ExtendedWorkerState fresh = new ExtendedWorkerState("http://w4:8083/", -1L, null);
        emitJoin("join_sessioned_fresh", IncrementalCooperativeConnectProtocol.metadataRequest(fresh, true));

        // Assignments, version 0 (ConnectProtocol, used by the eager assignor).
        emit("as_v0_empty", v0(NO_ERROR, "leader-1", "http://leader:8083/", 0L, list(), tasks()));
        emit("as_v0_one_connector", v0(NO_ERROR, "leader-1", "http://leader:8083/", 5L, list("c1"), tasks("c1", 0, 1, 2)));
        emit("as_v0_connectors_and_tasks", v0(NO_ERROR, "leader-1", "http://leader:8083/", 9L,
                list("beta", "alpha"), concat(tasks("alpha", 0, 1), tasks("beta", 0), tasks("gamma", 2))));
        emit("as_v0_tasks_only", v0(NO_ERROR, "leader-1", "http://leader:8083/", 9L, list(),
                concat(tasks("x", 0, 1), tasks("y", 3))));
        emit("as_v0_config_mismatch", v0(CONFIG_MISMATCH, "leader-1", "http://leader:8083/", 99L, list(), tasks()));
        emit("as_v0_unicode", v0(NO_ERROR, "l\u00e9ader-\u2603", "http://\u00fcn\u00efc\u00f8d\u00e9/", 1L,
                list("conn\u00e9cteur-\u2603"), concat(tasks("conn\u00e9cteur-\u2603", 0), tasks("\u65e5\u672c\uD83D\uDCA1", 0))));
        emit("as_v0_large_values", v0(NO_ERROR, "leader-1", "http://leader:8083/", Long.MAX_VALUE, list("c"),
                tasks("c", 0, Integer.MAX_VALUE)));

        // Assignments, versions 1 and 2 (IncrementalCooperativeConnectProtocol).
        emit("as_v1_empty_lists", v12(1, NO_ERROR, 0L, list(), tasks(), list(), tasks(), 0));
        emit("as_v2_empty_lists", v12(2, NO_ERROR, 0L, list(), tasks(), list(), tasks(), 0));
        emit("as_v1_assigned", v12(1, NO_ERROR, 4L, list("c1"), tasks("c1", 0), list(), tasks(), 0));
        emit("as_v1_revocations", v12(1, NO_ERROR, 4L, list(), tasks(), list("c2"), tasks("c2", 0, 1), 0));
        emit("as_v1_revoked_tasks_only", v12(1, NO_ERROR, 4L, list(), tasks(), list(), tasks("c3", 2), 0));
        emit("as_v1_delay", v12(1, NO_ERROR, 4L, list(), tasks(), list(), tasks(), 30000));
        emit("as_v1_config_mismatch", v12(1, CONFIG_MISMATCH, 17L, list(), tasks(), list(), tasks(), 0));
        emit("as_v2_config_mismatch", v12(2, CONFIG_MISMATCH, 17L, list(), tasks(), list(), tasks(), 0));
        emit("as_v2_full", v12(2, NO_ERROR, 21L, list("c1"), concat(tasks("c1", 0, 1), tasks("c4", 0)),
                list("c2"), concat(tasks("c2", 0), tasks("c3", 5)), 1234));
        emit("as_v2_many_connectors", v12(2, NO_ERROR, 22L, list("zeta", "alpha", "mid"),
                concat(tasks("alpha", 0), tasks("mid", 0, 1), tasks("zeta", 0)),
                list("rev-b", "rev-a"), concat(tasks("rev-a", 0), tasks("rev-b", 0)), 0));
        emit("as_v2_unicode", v12(2, NO_ERROR, 2L, list("\u65e5\u672c"), tasks("\u65e5\u672c", 0),
                list("\uD83D\uDCA1"), tasks("\uD83D\uDCA1", 3), 7));
    }

    private static ConnectProtocol.Assignment v0(short error, String leader, String url, long offset,
                                                 Collection<String> connectors, Collection<ConnectorTaskId> taskIds) {
        return new ConnectProtocol.Assignment(error, leader, url, offset, connectors, taskIds);
    }

    private static void emit(String name, ConnectProtocol.Assignment a) {
        emit(name, ConnectProtocol.serializeAssignment(a));
    }

    private static ByteBuffer v12(int version, short error, long offset, Collection<String> connectors,
                                  Collection<ConnectorTaskId> taskIds, Collection<String> revokedConnectors,
                                  Collection<ConnectorTaskId> revokedTasks, int delay) {
        ExtendedAssignment a = new ExtendedAssignment((short) version, error, "leader-1", "http://leader:8083/", offset,
                connectors, taskIds, revokedConnectors, revokedTasks, delay);
        return IncrementalCooperativeConnectProtocol.serializeAssignment(a, version >= 2);
    }

    private static void emitJoin(String prefix, JoinGroupRequestProtocolCollection protocols) {
        int i = 0;
        for (JoinGroupRequestProtocol p : protocols) {
            emit(prefix + "_" + i + "_" + p.name(), ByteBuffer.wrap(p.metadata()));
            i++;
        }
    }

    private static void emit(String name, ByteBuffer buffer) {
        System.out.println(name + " " + (buffer == null ? "null" : hex(buffer)));
    }

    private static List<String> list(String... names) {
        return new ArrayList<>(Arrays.asList(names));
    }

    private static List<ConnectorTaskId> tasks() {
        return new ArrayList<>();
    }

    private static List<ConnectorTaskId> tasks(String connector, int... numbers) {
        List<ConnectorTaskId> out = new ArrayList<>();
        for (int n : numbers) out.add(new ConnectorTaskId(connector, n));
        return out;
    }

    @SafeVarargs
    private static List<ConnectorTaskId> concat(List<ConnectorTaskId>... parts) {
        List<ConnectorTaskId> out = new ArrayList<>();
        for (List<ConnectorTaskId> p : parts) out.addAll(p);
        return out;
    }

    // ---- decode mode -----------------------------------------------------------------------------

    private static void decode() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) continue;
            String[] parts = line.split(" ", 2);
            String kind = parts[0];
            byte[] bytes = unhex(parts.length > 1 ? parts[1].trim() : "");
            try {
                if (kind.equals("metadata")) {
                    short version = bytes.length >= 2 ? ByteBuffer.wrap(bytes).getShort() : 0;
                    ExtendedWorkerState state = IncrementalCooperativeConnectProtocol.deserializeMetadata(ByteBuffer.wrap(bytes));
                    ByteBuffer again = version == 0
                            ? ConnectProtocol.serializeMetadata(state)
                            : IncrementalCooperativeConnectProtocol.serializeMetadata(state, version >= 2);
                    System.out.println("OK " + hex(again) + " " + state);
                } else if (kind.equals("assignment")) {
                    ExtendedAssignment a = IncrementalCooperativeConnectProtocol.deserializeAssignment(ByteBuffer.wrap(bytes));
                    ByteBuffer again = a.version() == 0
                            ? ConnectProtocol.serializeAssignment(a)
                            : IncrementalCooperativeConnectProtocol.serializeAssignment(a, a.version() >= 2);
                    System.out.println("OK " + hex(again) + " version=" + a.version() + " " + a);
                } else {
                    System.out.println("ERR unknown kind " + kind);
                }
            } catch (Exception e) {
                System.out.println("ERR " + e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).replace('\n', ' '));
            }
        }
    }

    private static String hex(ByteBuffer buffer) {
        ByteBuffer b = buffer.duplicate();
        StringBuilder sb = new StringBuilder();
        while (b.hasRemaining()) sb.append(String.format("%02x", b.get() & 0xff));
        return sb.toString();
    }

    private static byte[] unhex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }
}
