// Golden JSON text from Apache Kafka Connect 3.9.0's JsonConverter (Jackson 2.16 underneath), for the one
// Java-compatible JSON writer and reader (kconnect/runtime/storage/java_json.py). Run by
// tests/golden/regenerate.sh; the output, java_json.txt, is read by tests/unit/test_java_json.py.
// Lines:  write <name> <hex of the bytes JsonConverter (schemas.enable=false) wrote>
//         read <name> <hex of the input> <hex of Jackson's re-serialized tree, or "error">
// The JDK's Double.toString before JDK 19 prints a longer digit string than the shortest for a few doubles
// (2.0E23 as 2.0000000000000002E23, JDK-4511638); the cases here avoid them so the file is the same on
// every JDK, and kconnect writes the shortest digits, as JDK 19+ does.
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.json.JsonConverter;

public class GoldenJavaJson {
    static final ObjectMapper M = new ObjectMapper();

    static JsonConverter converter(String decimalFormat) {
        JsonConverter c = new JsonConverter();
        Map<String, Object> cfg = new HashMap<>();
        cfg.put("schemas.enable", "false");
        cfg.put("decimal.format", decimalFormat);
        c.configure(cfg, false);
        return c;
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x & 0xff));
        return s.length() == 0 ? "-" : s.toString();
    }

    static void write(String name, Schema schema, Object value) {
        System.out.println("write " + name + " " + hex(converter("NUMERIC").fromConnectData("t", schema, value)));
    }

    static void read(String name, String text) {
        byte[] in = text.getBytes(StandardCharsets.UTF_8);
        String out;
        try {
            out = hex(M.writeValueAsBytes(M.readTree(in)));
        } catch (Exception e) {
            out = "error";
        }
        System.out.println("read " + name + " " + hex(in) + " " + out);
    }

    public static void main(String[] args) throws Exception {
        // Strings: every C0 control character, DEL and C1, the JSON specials, line separators.
        StringBuilder controls = new StringBuilder();
        for (char c = 0; c < 0x20; c++) controls.append(c);
        write("string_controls", Schema.STRING_SCHEMA, controls.toString());
        write("string_specials", Schema.STRING_SCHEMA, "\"\\/ \u007f\u0080\u009f\u00a0\u00e9\u2028\u2029\ufeff\uffff");
        // Outside the BMP: a surrogate pair in a string and in a map key; lone surrogates.
        write("string_non_bmp", Schema.STRING_SCHEMA, "a\ud83d\ude00b\ud800\udc00\udbff\udfff");
        write("string_lone_high", Schema.STRING_SCHEMA, "x\ud800y");
        write("string_lone_low", Schema.STRING_SCHEMA, "x\udc00y");
        Map<String, String> keyed = new LinkedHashMap<>();
        keyed.put("k\ud83d\ude00\u0000\u001b", "\u00ff\u0080\u07ff\u0800\uffff");
        keyed.put("\n", "\ud83d\ude00");
        write("map_key_escapes", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.STRING_SCHEMA).build(), keyed);
        // Doubles, written with Double.toString (plain between 1e-3 and 1e7, else computerized notation).
        double[] doubles = {0.0, -0.0, 1.0, -2.5, 0.1, 0.001, 9.999e-4, 1e-5, 1234567.0, 9999999.0, 1e7, 1.0E10,
            123456.789, 1.0 / 3, 100.0, 1e21, 1e22, 4.35, 5e-324, Double.MIN_NORMAL, Double.MAX_VALUE,
            Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY};
        Object[] boxed = Arrays.stream(doubles).boxed().toArray();
        write("doubles", SchemaBuilder.array(Schema.FLOAT64_SCHEMA).build(), Arrays.asList(boxed));
        // Floats, written with Float.toString (its own shortest digits, not the double's).
        Float[] floats = {0.1f, -0.0f, 1e10f, 1e7f, 9999999f, 1e-3f, 16777216f, 3.4028235e38f, 1.4e-45f, 0.3f,
            Float.NaN, Float.POSITIVE_INFINITY};
        write("floats", SchemaBuilder.array(Schema.FLOAT32_SCHEMA).build(), Arrays.asList(floats));
        // Integers at the ends of their types, and Decimal as a JSON number (decimal.format=NUMERIC):
        // integers beyond a long, negative and large positive scales.
        write("int64_bounds", SchemaBuilder.array(Schema.INT64_SCHEMA).build(),
            Arrays.asList(Long.MIN_VALUE, Long.MAX_VALUE, 0L, -1L));
        write("int8_bounds", SchemaBuilder.array(Schema.INT8_SCHEMA).build(), Arrays.asList((byte) -128, (byte) 127));
        write("decimal_big_integer", Decimal.schema(0), new BigDecimal(BigInteger.ONE.shiftLeft(100).negate()));
        write("decimal_negative_scale", Decimal.schema(-3), new BigDecimal(new BigInteger("123"), -3));
        write("decimal_small", Decimal.schema(10), new BigDecimal("1E-10"));
        write("decimal_fraction", Decimal.schema(4), new BigDecimal("-12345678901234567890.1234"));
        Map<String, Object> schemaless = new LinkedHashMap<>();
        schemaless.put("max", Long.MAX_VALUE);
        schemaless.put("d", 2.5e-7);
        schemaless.put("s", "\u0000\ud83d\ude00");
        write("schemaless_mixed", null, schemaless);
        // The reader: what Jackson (ObjectMapper.readTree, Connect's deserializer defaults) accepts.
        read("big_integer", "[123456789012345678901234567890,-9223372036854775809]");
        read("exponents", "[1e2,1E-2,-0.0,1.5e300,0.1]");
        read("escapes", "\"\\u0041\\ud83d\\ude00\\/\\b\"");
        read("raw_non_bmp", "\"\ud83d\ude00\"");
        read("nan", "[NaN]");
        read("infinity", "[Infinity]");
        read("leading_zero", "[01]");
        read("trailing_comma", "[1,]");
        read("single_quotes", "['a']");
        read("comment", "[1]/*x*/");
        read("raw_control", "\"a\u0001b\"");
    }
}
