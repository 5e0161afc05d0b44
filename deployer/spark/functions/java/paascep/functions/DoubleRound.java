package paascep.functions;

import java.math.BigDecimal;
import java.math.RoundingMode;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * round(x, digits) of a double as the reference executor rounds it: its shortest digits (see
 * DoubleText), rounded half away from zero to {@code digits} places, read back as a double.
 *
 * <p>Spark's round of a double rounds the digits of Java 17's Double.toString, which are sometimes
 * not the shortest: 4.32989882904645e+16 is 4.3298988290464496E16 there, so round(x, -3) gave
 * 4.3298988290464e+16 where the reference gives 4.3298988290465e+16; and it rounded -1e-50 to 0.0
 * where the reference gives -0.0.
 */
public final class DoubleRound implements UDF2<Double, Integer, Double> {
  private static final long serialVersionUID = 1L;

  /** The function for a column expression: Spark's Java UDF API, which knows its argument types. */
  public static UserDefinedFunction function() {
    return functions.udf(new DoubleRound(), DataTypes.DoubleType);
  }

  @Override
  public Double call(Double value, Integer digits) {
    if (value == null || digits == null) {
      return null;
    }
    double d = value;
    if (Double.isNaN(d) || Double.isInfinite(d) || d == 0) {
      return value;
    }
    double rounded = DoubleText.shortest(d).setScale(digits, RoundingMode.HALF_UP).doubleValue();
    // a negative value rounded to zero is -0.0, as the reference's Decimal('-0.00') becomes
    return rounded == 0 && d < 0 ? -0.0 : rounded;
  }
}
