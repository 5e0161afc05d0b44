package paascep.functions;

import com.fasterxml.jackson.core.io.schubfach.DoubleToDecimal;
import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * A double's text as Python's repr writes it, which is how the reference executor writes it: the
 * shortest digits that read back as the same double (the closest to it of those), in fixed notation
 * for 1e-4 <= |x| < 1e16 ("0.0001", "10000000.0") and else as "d.ddde+XX" ("1e-05", "1e+16"),
 * "nan", "inf" and "-inf".
 *
 * <p>Java 17's Double.toString, which Spark's cast of a double to text uses, is not always the
 * shortest nor the closest (9.2233720347072922E18 for 9.223372034707292e+18, 9.999999999999999E22
 * for 1e+23); Java 19 fixed it with Raffaello Giulietti's Schubfach, which Jackson ships in Spark's
 * class path and which this takes its digits from. Schubfach writes at least two digits, the
 * closest such: where one digit reads back as the same double (subnormals: 4.9E-324 is 5e-324),
 * that digit is taken, rounded from the double's exact value.
 */
public final class DoubleText implements UDF1<Double, String> {
  private static final long serialVersionUID = 1L;
  private static final MathContext ONE_DIGIT = new MathContext(1, RoundingMode.HALF_EVEN);

  /** The function for a column expression: Spark's Java UDF API, which knows it takes a Double. */
  public static UserDefinedFunction function() {
    return functions.udf(new DoubleText(), DataTypes.StringType);
  }

  @Override
  public String call(Double value) {
    return value == null ? null : text(value);
  }

  /** Python's repr of {@code d}. */
  public static String text(double d) {
    if (Double.isNaN(d)) {
      return "nan";
    }
    if (Double.isInfinite(d)) {
      return d > 0 ? "inf" : "-inf";
    }
    if (d == 0) {
      return Double.doubleToRawLongBits(d) < 0 ? "-0.0" : "0.0";
    }
    BigDecimal b = shortest(d);
    String digits = b.unscaledValue().abs().toString();
    int exponent = digits.length() - 1 - b.scale(); // of the first digit: d.ddd x 10^exponent
    if (exponent >= -4 && exponent < 16) {
      String plain = b.toPlainString();
      return plain.indexOf('.') < 0 ? plain + ".0" : plain;
    }
    StringBuilder out = new StringBuilder(24);
    if (b.signum() < 0) {
      out.append('-');
    }
    out.append(digits.charAt(0));
    if (digits.length() > 1) {
      out.append('.').append(digits, 1, digits.length());
    }
    out.append(exponent < 0 ? "e-" : "e+");
    int e = Math.abs(exponent);
    if (e < 10) {
      out.append('0');
    }
    return out.append(e).toString();
  }

  /** The shortest decimal that reads back as {@code d}, the closest to it of those; no trailing zeros. */
  static BigDecimal shortest(double d) {
    BigDecimal atLeastTwo = new BigDecimal(DoubleToDecimal.toString(d)).stripTrailingZeros();
    if (atLeastTwo.precision() == 2) {
      BigDecimal one = new BigDecimal(d).round(ONE_DIGIT);
      if (Double.parseDouble(one.toString()) == d) {
        return one.stripTrailingZeros();
      }
    }
    return atLeastTwo;
  }
}
